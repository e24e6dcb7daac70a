"""Regenerate ``schedlab/data/wordnet/hypernyms.json`` from a local WordNet 3.0.

The concept hierarchy's graph is the hypernym closure (hypernyms and instance hypernyms) of
every synset named in ``schedlab/data/wordnet/label_synsets.csv``, read through NLTK's WordNet
reader.  The mapping table is curated by hand; this script checks that each synset exists in
WordNet 3.0 as a noun under exactly that name and writes the graph.

Where WordNet comes from (Debian/Ubuntu)::

    apt-get install -y wordnet-base wordnet-sense-index   # the database in /usr/share/wordnet
    pip install -e ".[wordnet]"                            # NLTK
    python scripts/build_wordnet_hierarchy.py --nltk-data ~/nltk_data

NLTK reads WordNet from ``<NLTK_DATA>/corpora/wordnet``; this script copies the database files
there (NLTK refuses symbolic links that leave its data folder) and adds the ``lexnames`` file
that Debian's package leaves out: the 45 lexicographer file names of WordNet 3.0
(``00 adj.all`` ... ``44 adj.ppl``, each with its syntactic category), written below from
WordNet 3.0's documentation of that file (the lexnames(5WN) manual page).  With
``--nltk-data`` the prepared folder is kept, so ``NLTK_DATA=<that folder>`` lets the
``schedlab[wordnet]`` extra and the NLTK comparison test use it.

``--check`` compares the freshly built graph with the shipped file and exits 1 if they differ.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from schedlab.world.concept_hierarchy import (
    EDGE_KINDS,
    GRAPH_SCHEMA,
    WORDNET_VERSION,
    MappingRow,
    hypernym_closure,
    mapping_from_csv,
)

log = logging.getLogger("build_wordnet_hierarchy")

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = REPO_ROOT / "schedlab" / "data" / "wordnet"
DEFAULT_WORDNET_DIR = Path("/usr/share/wordnet")

#: WordNet 3.0's lexicographer files (number = position): name and syntactic category
#: (1 noun, 2 verb, 3 adjective, 4 adverb), as WordNet 3.0's lexnames(5WN) page lists them.
LEXNAMES: tuple[tuple[str, int], ...] = (
    ("adj.all", 3), ("adj.pert", 3), ("adv.all", 4), ("noun.Tops", 1), ("noun.act", 1),
    ("noun.animal", 1), ("noun.artifact", 1), ("noun.attribute", 1), ("noun.body", 1),
    ("noun.cognition", 1), ("noun.communication", 1), ("noun.event", 1), ("noun.feeling", 1),
    ("noun.food", 1), ("noun.group", 1), ("noun.location", 1), ("noun.motive", 1),
    ("noun.object", 1), ("noun.person", 1), ("noun.phenomenon", 1), ("noun.plant", 1),
    ("noun.possession", 1), ("noun.process", 1), ("noun.quantity", 1), ("noun.relation", 1),
    ("noun.shape", 1), ("noun.state", 1), ("noun.substance", 1), ("noun.time", 1),
    ("verb.body", 2), ("verb.change", 2), ("verb.cognition", 2), ("verb.communication", 2),
    ("verb.competition", 2), ("verb.consumption", 2), ("verb.contact", 2),
    ("verb.creation", 2), ("verb.emotion", 2), ("verb.motion", 2), ("verb.perception", 2),
    ("verb.possession", 2), ("verb.social", 2), ("verb.stative", 2), ("verb.weather", 2),
    ("adj.ppl", 3),
)


def lexnames_text() -> str:
    """The ``lexnames`` file: ``NN<TAB>name<TAB>category`` per line, 45 lines."""
    return "".join(f"{i:02d}\t{name}\t{category}\n"
                   for i, (name, category) in enumerate(LEXNAMES))


def prepare_nltk_data(wordnet_dir: Path, nltk_data: Path) -> Path:
    """Copy the database files of ``wordnet_dir`` to ``nltk_data/corpora/wordnet`` and add
    ``lexnames`` when it is missing; returns the corpus folder."""
    if not (wordnet_dir / "data.noun").is_file():
        raise FileNotFoundError(f"no WordNet database in {wordnet_dir} (data.noun missing); "
                                "apt-get install -y wordnet-base wordnet-sense-index")
    corpus = nltk_data / "corpora" / "wordnet"
    corpus.mkdir(parents=True, exist_ok=True)
    for source in sorted(wordnet_dir.iterdir()):
        if source.is_file():
            shutil.copyfile(source, corpus / source.name)
    lexnames = corpus / "lexnames"
    if not lexnames.exists():
        lexnames.write_text(lexnames_text(), encoding="ascii")
    return corpus


def build_document(rows: Sequence[MappingRow],
                   parents_of: Callable[[str], Iterable[tuple[str, str]]],
                   definition_of: Callable[[str], str],
                   provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    """The graph document: the closure of the rows' synsets in node-link layout.

    Nodes sorted by id, each with its ``definition``; edges (synset -> hypernym, ``kind``
    hypernym or instance_hypernym) sorted; ``graph`` holds counts and provenance.
    """
    seeds = sorted({row.synset for row in rows})
    closure = hypernym_closure(seeds, parents_of)
    nodes = [{"id": node, "definition": definition_of(node)} for node in sorted(closure)]
    edges = sorted(({"source": node, "target": parent, "kind": kind}
                    for node, out in closure.items() for parent, kind in out),
                   key=lambda e: (e["source"], e["target"], e["kind"]))
    graph = {"wordnet_version": WORDNET_VERSION,
             "edge_direction": "synset -> its hypernym or instance hypernym",
             "edge_kinds": list(EDGE_KINDS),
             "label_synsets": len(seeds), "nodes": len(nodes), "edges": len(edges)}
    graph.update(provenance or {})
    return {"schema": GRAPH_SCHEMA, "directed": True, "multigraph": False,
            "graph": graph, "nodes": nodes, "edges": edges}


def encode_document(doc: dict[str, Any]) -> bytes:
    """The JSON text, deterministic and diff-friendly: one node or edge per line."""
    head = {k: v for k, v in doc.items() if k not in ("nodes", "edges")}
    lines = [json.dumps(head, sort_keys=True, ensure_ascii=False)[:-1] + ","]
    for key in ("nodes", "edges"):
        items = [json.dumps(item, sort_keys=True, ensure_ascii=False) for item in doc[key]]
        lines.append(f'"{key}": [')
        lines.append(",\n".join(items))
        lines.append("]," if key == "nodes" else "]}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def check_rows(rows: Sequence[MappingRow], lookup: Callable[[str], tuple[str, str]]) -> None:
    """Each row's synset exists under exactly its name and is a noun; ``lookup(name)`` gives
    (canonical name, part of speech) or raises LookupError."""
    problems = []
    for row in rows:
        try:
            name, pos = lookup(row.synset)
        except LookupError as exc:
            problems.append(f"{row.label_set}/{row.label}: {exc}")
            continue
        if name != row.synset or pos != "n":
            problems.append(f"{row.label_set}/{row.label}: {row.synset} is {name} ({pos})")
    if problems:
        raise ValueError("mapping table: " + "; ".join(problems))


def _nltk_wordnet(nltk_data: Path) -> Any:
    os.environ["NLTK_DATA"] = str(nltk_data)
    import nltk

    if str(nltk_data) not in nltk.data.path:
        nltk.data.path.insert(0, str(nltk_data))
    from nltk.corpus import wordnet as wn

    version = wn.get_version()
    if version != WORDNET_VERSION:
        raise RuntimeError(f"NLTK reads WordNet {version}, expected {WORDNET_VERSION}")
    return wn


def build_from_wordnet(wn: Any, rows: Sequence[MappingRow]) -> dict[str, Any]:
    """Check the rows against NLTK's WordNet and build the graph document."""
    from nltk.corpus.reader.wordnet import WordNetError

    def lookup(name: str) -> tuple[str, str]:
        try:
            synset = wn.synset(name)
        except (WordNetError, ValueError) as exc:
            raise LookupError(str(exc)) from None
        return synset.name(), synset.pos()

    def parents_of(node: str) -> list[tuple[str, str]]:
        synset = wn.synset(node)
        return ([(h.name(), "hypernym") for h in synset.hypernyms()]
                + [(h.name(), "instance_hypernym") for h in synset.instance_hypernyms()])

    check_rows(rows, lookup)
    provenance = {"source": f"WordNet {WORDNET_VERSION} (Princeton University) read with "
                            "NLTK's WordNet reader",
                  "generator": "scripts/build_wordnet_hierarchy.py",
                  "mapping": "label_synsets.csv"}
    return build_document(rows, parents_of, lambda n: str(wn.synset(n).definition()),
                          provenance)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wordnet-dir", type=Path, default=DEFAULT_WORDNET_DIR,
                        help="WordNet 3.0 database folder (default: %(default)s)")
    parser.add_argument("--nltk-data", type=Path, default=None,
                        help="folder to prepare as NLTK_DATA and keep (default: a temporary "
                             "folder, removed afterwards)")
    parser.add_argument("--mapping", type=Path, default=DATA_DIR / "label_synsets.csv")
    parser.add_argument("--out", type=Path, default=DATA_DIR / "hypernyms.json")
    parser.add_argument("--check", action="store_true",
                        help="compare with --out instead of writing it; exit 1 on a difference")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    rows = mapping_from_csv(args.mapping.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as scratch:
        nltk_data = args.nltk_data or Path(scratch)
        prepare_nltk_data(args.wordnet_dir, nltk_data)
        wn = _nltk_wordnet(nltk_data)
        doc = build_from_wordnet(wn, rows)
    graph = doc["graph"]
    log.info("%d label rows, %d synsets, closure %d nodes, %d edges", len(rows),
             graph["label_synsets"], graph["nodes"], graph["edges"])
    if args.check:
        shipped = json.loads(args.out.read_text(encoding="utf-8"))
        if shipped != doc:
            log.error("%s differs from the graph built from %s", args.out, args.wordnet_dir)
            return 1
        log.info("%s is up to date", args.out)
        return 0
    args.out.write_bytes(encode_document(doc))
    log.info("wrote %s (%d bytes)", args.out, args.out.stat().st_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
