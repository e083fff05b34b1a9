"""The "Current figures" table at the top of bench/RESULTS.md: one row per training-step workload,
the latest figures a bench script recorded for it, with a link to the section they come from.

The table sits between two markers and is the only part of the file this module rewrites:

    <!-- current-figures:begin -->
    | workload | stepgraph graph µs | ... |
    | --- | --- | ... |
    | seed_mlp | 22.8 | ... |
    <!-- current-figures:end -->

A bench script appends its section (sections stay append-only) and replaces the rows of the
workloads it measured in the same write (bench_vs_torch.append_results_md); rows of other
workloads are kept as they were, new workloads are added at the end. A workload whose stepgraph
figure is missing from the run (an error) keeps its old row. Pure Python, no torch or jax.
"""
from __future__ import annotations

import dataclasses
import re
import unittest
from typing import Dict, List, Optional, Sequence, Tuple

BEGIN = "<!-- current-figures:begin -->"
END = "<!-- current-figures:end -->"
HEADER = ["workload", "stepgraph graph µs", "torch graph µs", "JAX jit µs",
          "torch graph / stepgraph", "date (UTC)", "GPU", "from"]


@dataclasses.dataclass(frozen=True)
class Row:
    workload: str            # the script's workload name (seed_mlp, poisson_4x64, ...)
    stepgraph_graph: str     # formatted cells, as the section's table writes them
    torch_graph: str
    jax_jit: str
    ratio: str
    date: str
    gpu: str
    source: str              # a markdown link to the section: [text](#anchor)

    def cells(self) -> List[str]:
        return [self.workload, self.stepgraph_graph, self.torch_graph, self.jax_jit, self.ratio,
                self.date, self.gpu, self.source]


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |"


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading's text (before de-duplication): lower case, everything
    but letters, digits, '_', '-' and spaces dropped, spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link's text only
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def headings(text: str) -> List[str]:
    """ATX headings' texts in document order, outside fenced code blocks."""
    out, fence = [], False
    for ln in text.splitlines():
        if ln.lstrip().startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$", ln)
        if m:
            out.append(m.group(1))
    return out


def anchors(text: str) -> List[str]:
    """Every heading's anchor as GitHub renders it: a repeated slug gets -1, -2, ..."""
    seen: Dict[str, int] = {}
    out = []
    for h in headings(text):
        s = github_slug(h)
        n = seen.get(s, 0)
        out.append(s if n == 0 else f"{s}-{n}")
        seen[s] = n + 1
    return out


def last_anchor(text: str, heading: str) -> str:
    """The anchor of the last heading of `text` whose text is `heading` (the section just
    appended)."""
    hs, an = headings(text), anchors(text)
    for h, a in zip(reversed(hs), reversed(an)):
        if h == heading:
            return a
    raise ValueError(f"no heading {heading!r} in the file")


def section_heading(section: str) -> str:
    """A section's heading text ("2026-12-01 10:00 UTC — NVIDIA H200 — ...")."""
    first = section.lstrip("\n").splitlines()[0]
    m = re.match(r"^#{1,6}\s+(.*?)\s*$", first)
    if not m:
        raise ValueError(f"a section starts with its heading, not {first!r}")
    return m.group(1)


def rows_from_records(records: Sequence[dict], meta: dict, anchor: str,
                      fmt_us, fmt_x) -> List[Row]:
    """Rows for the workloads of a run whose stepgraph graph figure was measured. `records` are
    the bench scripts' records (figures, errors, derived); fmt_us/fmt_x the scripts' formats."""
    date = meta["date_utc"].replace(" UTC", "")
    link_text = date + (", --quick" if meta.get("quick") else "")
    out = []
    for r in records:
        f, e, d = r["figures"], r.get("errors", {}), r.get("derived", {})
        if f.get("stepgraph_graph_us") is None:
            continue
        out.append(Row(
            workload=r["workload"],
            stepgraph_graph=fmt_us(f["stepgraph_graph_us"]),
            torch_graph=fmt_us(f.get("torch_graph_us"), e.get("torch_graph")),
            jax_jit=fmt_us(f.get("jax_jit_us"), e.get("jax")),
            ratio=fmt_x(d.get("speedup_vs_torch_graph")),
            date=date, gpu=meta.get("gpu") or "unknown GPU",
            source=f"[{link_text}](#{anchor})"))
    return out


def _span(text: str) -> Optional[Tuple[int, int]]:
    """The character range strictly between the markers; None when the file has none."""
    b, e = text.count(BEGIN), text.count(END)
    if b == 0 and e == 0:
        return None
    if b != 1 or e != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f"bench/RESULTS.md: expected one {BEGIN} followed by one {END}")
    return text.index(BEGIN) + len(BEGIN), text.index(END)


def parse_rows(text: str) -> List[List[str]]:
    """The table's body rows (cells stripped); [] when the file has no table."""
    span = _span(text)
    if span is None:
        return []
    lines = [ln.strip() for ln in text[span[0]:span[1]].splitlines() if ln.strip().startswith("|")]
    body = lines[2:] if len(lines) >= 2 else []
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in body]


def render(rows: Sequence[Sequence[str]]) -> str:
    return "\n".join([_line(HEADER), _line(["---"] * len(HEADER)), *(_line(r) for r in rows)])


def update_table(text: str, new: Sequence[Row]) -> str:
    """`text` with the rows of `new`'s workloads replaced (others kept, in order; new workloads
    at the end). A file without the markers gets the table, under a heading, before "## Runs"."""
    if not new:
        return text
    span = _span(text)
    old = parse_rows(text)
    by_name = {r.workload: r.cells() for r in new}
    rows = [by_name.pop(r[0].strip("`"), r) for r in old]
    rows += [by_name[r.workload] for r in new if r.workload in by_name]
    block = "\n" + render(rows) + "\n"
    if span is not None:
        return text[:span[0]] + block + text[span[1]:]
    table = f"## Current figures\n\n{BEGIN}{block}{END}\n\n"
    at = text.find("\n## Runs\n")
    if at < 0:
        return text.rstrip("\n") + ("\n\n" if text.strip() else "") + table
    return text[:at + 1] + table + text[at + 1:]


# --------------------------------------------------------------------------------------------
# Tests, run by each bench script's --self-test.
# --------------------------------------------------------------------------------------------

SAMPLE = f"""# results

## Current figures

{BEGIN}
| workload | stepgraph graph µs | torch graph µs | JAX jit µs | torch graph / stepgraph | date (UTC) | GPU | from |
| --- | --- | --- | --- | --- | --- | --- | --- |
| seed_mlp | 22.8 | 117.0 | 76.3 | 5.14x | 2026-11-30 | NVIDIA H200 | [2026-11-30 12:15](#2026-11-30-1215-utc--nvidia-h200) |
| poisson_4x64 | 175.4 | 1321 | — | 7.53x | 2026-11-30 | NVIDIA H200 | [2026-11-30 12:15](#2026-11-30-1215-utc--nvidia-h200) |
{END}

## Runs

### 2026-11-30 12:15 UTC — NVIDIA H200

| workload | stepgraph graph µs |
| --- | --- |
| seed MLP | 22.8 |
"""


def _fmt_us(v, err=None):
    return ("skipped" if err else "—") if v is None else f"{v:.1f}"


def _fmt_x(v):
    return "—" if v is None else f"{v:.2f}x"


class Tests(unittest.TestCase):
    def _row(self, name: str, us: str = "20.0") -> Row:
        return Row(name, us, "100.0", "—", "5.00x", "2026-12-01 10:00", "NVIDIA H200", "[x](#x)")

    def test_rows_replaced_others_kept_sections_untouched(self) -> None:
        out = update_table(SAMPLE, [self._row("seed_mlp"), self._row("large_mlp", "41000")])
        rows = parse_rows(out)
        self.assertEqual([r[0] for r in rows], ["seed_mlp", "poisson_4x64", "large_mlp"])
        self.assertEqual(rows[0][1:3], ["20.0", "100.0"])
        self.assertEqual(rows[1], parse_rows(SAMPLE)[1])  # kept as it was
        self.assertEqual(rows[2][1], "41000")
        self.assertEqual(out[out.index(END):], SAMPLE[SAMPLE.index(END):])  # below: unchanged
        self.assertEqual(out[:out.index(BEGIN)], SAMPLE[:SAMPLE.index(BEGIN)])  # above too
        self.assertEqual(update_table(out, [self._row("seed_mlp")]), out)  # idempotent
        self.assertEqual(update_table(SAMPLE, []), SAMPLE)

    def test_file_without_table_gets_one_before_runs(self) -> None:
        text = "# x\n\nintro\n\n## Runs\n\n### a\n"
        out = update_table(text, [self._row("seed_mlp")])
        self.assertTrue(out.index(BEGIN) < out.index("## Runs") < out.index("### a"))
        self.assertEqual([r[0] for r in parse_rows(out)], ["seed_mlp"])
        self.assertTrue(out.endswith("## Runs\n\n### a\n"))

    def test_malformed_markers_refused(self) -> None:
        for bad in (f"{BEGIN}\n", f"{END}\n{BEGIN}\n", f"{BEGIN}\n{END}\n{BEGIN}\n{END}\n"):
            with self.assertRaises(ValueError):
                update_table(bad, [self._row("seed_mlp")])

    def test_anchors_as_github_makes_them(self) -> None:
        h = "2026-11-30 12:15-12:55 UTC — NVIDIA H200 — where a product's time goes, specialized"
        self.assertEqual(github_slug(h),
                         "2026-11-30-1215-1255-utc--nvidia-h200--where-a-products-time-goes-specialized")
        text = "# a\n\n## Runs\n\n### 10:00 — GPU\n\n```\n# not a heading\n```\n\n### 10:00 — GPU\n"
        self.assertEqual(anchors(text), ["a", "runs", "1000--gpu", "1000--gpu-1"])
        self.assertEqual(last_anchor(text, "10:00 — GPU"), "1000--gpu-1")
        self.assertEqual(section_heading("\n### 10:00 — GPU\n\nbody\n"), "10:00 — GPU")

    def test_rows_from_records(self) -> None:
        recs = [{"workload": "seed_mlp", "figures": {"stepgraph_graph_us": 22.84,
                                                     "torch_graph_us": 117.0, "jax_jit_us": None},
                 "errors": {"jax": "skipped: slow"}, "derived": {"speedup_vs_torch_graph": 5.12}},
                {"workload": "mlp_8x256", "figures": {"stepgraph_graph_us": None},
                 "errors": {"stepgraph": "exit 1"}, "derived": {}},
                {"workload": "poisson_4x64", "figures": {"stepgraph_graph_us": 175.0}}]
        meta = {"date_utc": "2026-12-01 10:00 UTC", "gpu": "NVIDIA H200", "quick": True}
        rows = rows_from_records(recs, meta, "sec", _fmt_us, _fmt_x)
        self.assertEqual([r.workload for r in rows], ["seed_mlp", "poisson_4x64"])  # no error rows
        self.assertEqual(rows[0].cells(), ["seed_mlp", "22.8", "117.0", "skipped", "5.12x",
                                           "2026-12-01 10:00", "NVIDIA H200",
                                           "[2026-12-01 10:00, --quick](#sec)"])
        self.assertEqual(rows[1].cells()[2:5], ["—", "—", "—"])


def check_project_table(test: unittest.TestCase, text: str, workloads: Sequence[str]) -> None:
    """bench/RESULTS.md's own table: parses, has a row for each of `workloads`, and each row's
    link names a heading of the file."""
    rows = {r[0]: r for r in parse_rows(text)}
    known = set(anchors(text))
    for w in workloads:
        test.assertIn(w, rows, f"bench/RESULTS.md's current figures have no row for {w}")
    for r in rows.values():
        test.assertEqual(len(r), len(HEADER), r)
        m = re.search(r"\]\(#([^)]+)\)", r[-1])
        test.assertTrue(m and m.group(1) in known, f"{r[0]}: link {r[-1]} names no heading")
