"""Fixtures for the reporters: realistic Analysis objects built from schema-conformed tables.

The synthetic run is a DeepSeek-style decode step under DP attention with DeepEP:
world = tp = ep = N, attn_tp = 2 (so ATTN_TP pairs, attn_dp = N / 2). Per layer and rank:
attention GEMM -> AllReduce on ATTN_TP (attn_reduce.attn_tp) -> DeepEP normal dispatch on
MOE_EP -> expert GEMM -> DeepEP combine on MOE_EP; after the layers, a logits AllGather on TP
(path "other"). Rank 5 computes 15% slower, so its peers wait in every collective. Each
collective ends on all members at once (end = latest arrival + transfer), which is how waits
appear in real traces. MEASURED, PHASES and FINDINGS are filled the way the measure stage
defines them (transfer = min duration over members, wait = duration - transfer, efficiency
= bound / transfer).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from tracekit import schema as s
from tracekit.api import Analysis, Run
from tracekit.rules.labels import PathLabel

XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = '"><img src=x onerror=alert(1)>'

HIDDEN = 7168
TOPK = 8
ALPHA_NS = 3000.0
BETA_B_PER_NS = 450.0  # 450 GB/s NVLink, one direction
MS = 1_000_000


@dataclass
class _Cols:
    """Column-wise row accumulator (one array block per append)."""

    data: dict[str, list[Any]] = field(default_factory=dict)

    def add(self, n: int, **cols: Any) -> None:
        size = len(next(iter(self.data.values()))) if self.data else 0
        for name in set(self.data) | set(cols):
            column = self.data.setdefault(name, [None] * size)
            value = cols.get(name)
            if isinstance(value, np.ndarray | list):
                column.extend(list(value))
            else:
                column.extend([value] * n)

    def table(self, schema: pa.Schema) -> pa.Table:
        return s.conform(pa.table({k: v for k, v in self.data.items()}), schema)


def _collective(
    ev: _Cols, ms: _Cols, starts: np.ndarray, groups: list[np.ndarray], *, ranks: np.ndarray,
    name: str, op: str, group: str, path: str, layer: int | None, msg: int, bound_factor: float,
    eff: np.ndarray, overlap: float, instance0: int, pg_desc: str, stream: int,
) -> tuple[np.ndarray, int]:
    """One collective on every group: kernels, CPU wrappers and MEASURED rows; returns ends."""
    n = len(ranks)
    ends = np.zeros(n, dtype=np.int64)
    durs = np.zeros(n, dtype=np.int64)
    transfer = np.zeros(n, dtype=np.int64)
    skew = np.zeros(n, dtype=np.int64)
    inst = np.zeros(n, dtype=np.int64)
    bound = int(ALPHA_NS + bound_factor * msg / BETA_B_PER_NS)
    members = np.zeros(n, dtype=np.int32)
    for k, g in enumerate(groups):
        t = int(bound / eff[g[0]])
        end = int(starts[g].max()) + t
        ends[g] = end
        durs[g] = end - starts[g]
        transfer[g] = durs[g].min()
        skew[g] = starts[g] - starts[g].min()
        inst[g] = instance0 + k
        members[g] = len(g)
    base_id = len(next(iter(ev.data.values()))) if ev.data else 0
    ev.add(n, **{s.RANK: ranks, s.TS_NS: starts - 4000, s.DUR_NS: 3000,
                 s.NAME: "record_param_comms", s.CATEGORY: "cpu_op", s.KIND: s.Kind.CPU_OP,
                 s.PID: 1000 + ranks, s.TID: 1000 + ranks,
                 s.THREAD: "python main", s.OP: op, s.IN_BYTES: msg, s.OUT_BYTES: msg,
                 s.GROUP_SIZE: members, s.PG_DESC: pg_desc, s.META_SOURCE: s.MetaSource.ARGS,
                 s.KERNEL_CLASS: s.KernelClass.COMM, s.GROUP: group, s.PATH: path,
                 s.PHASE: PathLabel.PHASE_OF[path], s.LAYER: layer, s.IS_INSTANCE: False,
                 s.RULE_ID: "pg_desc", s.STATUS: s.Status.ATTRIBUTED,
                 s.REASON: f"pg_desc {pg_desc}", s.CALL_SITE: "forward <- " + path})
    ev.add(n, **{s.RANK: ranks, s.TS_NS: starts, s.DUR_NS: durs, s.NAME: name,
                 s.CATEGORY: "kernel", s.KIND: s.Kind.KERNEL, s.PID: ranks, s.TID: stream,
                 s.DEVICE: ranks, s.STREAM: stream, s.THREAD: f"stream {stream}", s.OP: op,
                 s.IN_BYTES: msg, s.OUT_BYTES: msg, s.GROUP_SIZE: members, s.PG_DESC: pg_desc,
                 s.META_SOURCE: s.MetaSource.LINKED, s.KERNEL_CLASS: s.KernelClass.COMM,
                 s.GROUP: group, s.PATH: path, s.PHASE: PathLabel.PHASE_OF[path],
                 s.LAYER: layer, s.IS_INSTANCE: True, s.RULE_ID: "pg_desc",
                 s.STATUS: s.Status.ATTRIBUTED, s.REASON: f"pg_desc {pg_desc}"})
    ids = np.arange(base_id + n, base_id + 2 * n)
    exposed = (durs * (1.0 - overlap)).astype(np.int64)
    ms.add(n, **{s.RANK: ranks, s.EVENT_ID: ids, s.INSTANCE: inst, s.NAME: name, s.OP: op,
                 s.GROUP: group, s.PATH: path, s.PHASE: PathLabel.PHASE_OF[path],
                 s.LAYER: layer, s.KERNEL_CLASS: s.KernelClass.COMM, s.TS_NS: starts,
                 s.DUR_NS: durs, s.MSG_BYTES: msg, s.N_RANKS: members, s.LINK_CLASS: "nvlink",
                 s.TRANSFER_NS: transfer, s.WAIT_NS: durs - transfer, s.SKEW_NS: skew,
                 s.BOUND_NS: bound, s.EFFICIENCY: bound / transfer,
                 s.ALGBW_GBPS: msg / transfer, s.BUSBW_GBPS: bound_factor * msg / transfer,
                 s.EXPOSED_NS: exposed})
    return ends, instance0 + len(groups)


def _compute(ev: _Cols, starts: np.ndarray, ranks: np.ndarray, durs: np.ndarray, name: str,
             phase: str, layer: int) -> np.ndarray:
    ev.add(len(ranks), **{s.RANK: ranks, s.TS_NS: starts, s.DUR_NS: durs, s.NAME: name,
                          s.CATEGORY: "kernel", s.KIND: s.Kind.KERNEL, s.PID: ranks, s.TID: 7,
                          s.DEVICE: ranks, s.STREAM: 7, s.THREAD: "stream 7",
                          s.KERNEL_CLASS: s.KernelClass.COMPUTE, s.PHASE: phase, s.LAYER: layer,
                          s.IS_INSTANCE: False, s.STATUS: s.Status.UNATTRIBUTED})
    return starts + durs


def build_analysis(
    n_ranks: int = 8, layers: int = 3, steps: int = 1, *, evil: str | None = None,
    only_events: bool = False, seed: int = 7,
) -> Analysis:
    """A realistic Analysis of a DPA + DeepEP decode run (see the module docstring)."""
    assert n_ranks % 2 == 0
    rng = np.random.default_rng(seed)
    ranks = np.arange(n_ranks, dtype=np.int64)
    pairs = [ranks[i:i + 2] for i in range(0, n_ranks, 2)]
    world = [ranks]
    slow = np.where(ranks == 5, 1.15, 1.0)
    ev, ms = _Cols(), _Cols()
    t = np.full(n_ranks, 1_700_000_000_000_000_000, dtype=np.int64) + ranks * 1000
    instance = 0
    tokens = 128
    a2a: list[tuple[int, np.ndarray]] = []
    hot = rng.dirichlet(np.ones(n_ranks) * 4)
    for _step in range(steps):
        for layer in range(layers):
            t = _compute(ev, t, ranks, (180_000 * slow).astype(np.int64), "attn_gemm_bf16",
                         s.Phase.OTHER, layer)
            eff = rng.uniform(0.35, 0.8, n_ranks)
            t, instance = _collective(
                ev, ms, t + 2000, pairs, ranks=ranks, layer=layer, instance0=instance,
                name="ncclDevKernel_AllReduce_Sum_bf16_RING_LL", op=s.Op.ALL_REDUCE,
                group=s.Group.ATTN_TP, path=PathLabel.ATTN_TP, msg=tokens * HIDDEN * 2,
                bound_factor=1.0, eff=eff, overlap=0.3, pg_desc="attn_tp", stream=20)
            split = rng.multinomial(tokens * TOPK, hot, size=n_ranks) * HIDDEN
            a2a.append((instance, split))
            name = "deep_ep::intranode::dispatch"
            if evil is not None and layer == 0 and _step == 0:
                name = evil
            t, instance = _collective(
                ev, ms, t + 2000, world, ranks=ranks, layer=layer, instance0=instance,
                name=name, op=s.Op.DISPATCH, group=s.Group.MOE_EP,
                path=PathLabel.DEEPEP_NORMAL_DISPATCH, msg=int(split.sum(axis=1).max()),
                bound_factor=(n_ranks - 1) / n_ranks, eff=eff, overlap=0.0,
                pg_desc="moe_ep", stream=20)
            t = _compute(ev, t + 1000, ranks, (250_000 * slow).astype(np.int64),
                         "fused_moe_kernel", s.Phase.EXPERTS, layer)
            t, instance = _collective(
                ev, ms, t + 2000, world, ranks=ranks, layer=layer, instance0=instance,
                name="deep_ep::intranode::combine", op=s.Op.COMBINE, group=s.Group.MOE_EP,
                path=PathLabel.DEEPEP_NORMAL_COMBINE, msg=2 * int(split.sum(axis=0).max()),
                bound_factor=(n_ranks - 1) / n_ranks, eff=eff, overlap=0.0,
                pg_desc="moe_ep", stream=20)
        t, instance = _collective(
            ev, ms, t + 5000, world, ranks=ranks, layer=None, instance0=instance,
            name="ncclDevKernel_AllGather_RING_LL", op=s.Op.ALL_GATHER, group=s.Group.TP,
            path=PathLabel.OTHER, msg=tokens * 4096 * 4, bound_factor=(n_ranks - 1) / n_ranks,
            eff=rng.uniform(0.5, 0.7, n_ranks), overlap=0.0, pg_desc="tp", stream=20)
    ev.data[s.EVENT_ID] = list(range(len(ev.data[s.RANK])))
    if evil is not None:
        ev.data[s.THREAD] = [evil if i == 0 else v for i, v in enumerate(ev.data[s.THREAD])]
    events = ev.table(s.EVENTS)
    rank_info = _table(n_ranks, s.RANK_INFO, {
        s.RANK: ranks.astype(np.int32), s.SOURCE: [f"rank{r}.trace.json.gz" for r in ranks],
        s.FORMAT: "kineto", s.BACKEND: "nccl", s.WORLD_SIZE: n_ranks, s.HOST: "node0",
        s.COUNT: np.bincount(events.column(s.RANK).to_numpy(), minlength=n_ranks),
    })
    process_groups = _table(3 * n_ranks, s.PROCESS_GROUPS, {
        s.RANK: np.repeat(ranks, 3).astype(np.int32),
        s.PG_NAME: ["0", "1", "2"] * n_ranks, s.PG_DESC: ["tp", "attn_tp", "moe_ep"] * n_ranks,
        s.GROUP_SIZE: [n_ranks, 2, n_ranks] * n_ranks, s.BACKEND: "cuda:nccl",
    })
    run = Run(events=events, process_groups=process_groups, rank_info=rank_info)
    if only_events:
        return Analysis(run=run)
    attributed = ev.table(s.ATTRIBUTED)
    measured = ms.table(s.MEASURED)
    return Analysis(
        run=run, attributed=attributed, measured=measured, findings_table=_findings(evil),
        phases_table=_phases(attributed, measured), extra_tables=_tables(a2a, measured),
        info={"scenario": "dpa_deepep", "tool": {"name": "tracekit"},
              "topology": {"tp_size": n_ranks, "dp_size": n_ranks // 2, "ep_size": n_ranks,
                           "enable_dp_attention": True}},
    )


def _table(n: int, schema: pa.Schema, cols: dict[str, Any]) -> pa.Table:
    """A table of ``schema`` from columns, scalars repeated n times."""
    full = {k: v if isinstance(v, np.ndarray | list) else [v] * n for k, v in cols.items()}
    return s.conform(pa.table(full), schema)


def _phases(attributed: pa.Table, measured: pa.Table) -> pa.Table:
    """PHASES rows per (rank, phase, layer), per (rank, phase) and all-rank totals."""
    a = attributed.select([s.RANK, s.PHASE, s.LAYER, s.KERNEL_CLASS, s.DUR_NS]).to_pandas()
    a[s.PHASE] = a[s.PHASE].astype(str)
    a[s.KERNEL_CLASS] = a[s.KERNEL_CLASS].astype(object)
    a[s.COMPUTE_NS] = a[s.DUR_NS].where(a[s.KERNEL_CLASS] == s.KernelClass.COMPUTE, 0)
    comp = a.groupby([s.RANK, s.PHASE, s.LAYER], dropna=False)[s.COMPUTE_NS].sum()
    m = measured.to_pandas()
    m[s.PHASE] = m[s.PHASE].astype(str)
    m[s.COUNT] = 1
    cols = [s.COUNT, s.MSG_BYTES, s.DUR_NS, s.EXPOSED_NS, s.TRANSFER_NS, s.WAIT_NS, s.BOUND_NS]
    comm = m.groupby([s.RANK, s.PHASE, s.LAYER], dropna=False)[cols].sum()
    df = comm.join(comp, how="outer").fillna(0).reset_index()
    df = df.rename(columns={s.DUR_NS: s.COMM_NS})
    df[s.FUSED_NS] = 0
    df[s.MEMCPY_NS] = 0
    sums = [s.COUNT, s.MSG_BYTES, s.COMM_NS, s.FUSED_NS, s.COMPUTE_NS, s.MEMCPY_NS,
            s.EXPOSED_NS, s.TRANSFER_NS, s.WAIT_NS, s.BOUND_NS]
    per_rank = df.groupby([s.RANK, s.PHASE])[sums].sum().reset_index()
    per_rank[s.LAYER] = None
    total = df.groupby([s.PHASE])[sums].sum().reset_index()
    total[s.RANK] = None
    total[s.LAYER] = None
    out = pd.concat([df, per_rank, total], ignore_index=True)
    out[s.EFFICIENCY] = out[s.BOUND_NS] / out[s.TRANSFER_NS].where(out[s.TRANSFER_NS] > 0)
    out[s.LAYER] = out[s.LAYER].astype("Int32")
    out[s.RANK] = out[s.RANK].astype("Int32")
    return s.conform(pa.Table.from_pandas(out, preserve_index=False), s.PHASES)


def _findings(evil: str | None) -> pa.Table:
    detail = f" kernel {evil}" if evil else ""
    return s.conform(pa.table({
        s.RULE_ID: ["a2a-imbalance", "straggler", "unattributed-comm"],
        s.SEVERITY: ["warning", "info", "error"],
        s.LAYER: pa.array([1, None, 0], pa.int32()),
        s.RANKS: [[3], [5], [0, 1]],
        s.GROUP: [s.Group.MOE_EP, None, s.Group.ATTN_TP],
        s.PATH: [PathLabel.DEEPEP_NORMAL_DISPATCH, None, PathLabel.ATTN_TP],
        s.MESSAGE: ["rank 3 receives 2.1x the mean dispatch bytes <b>hot expert</b>",
                    "rank 5 starts collectives late: its peers wait 12% of their comm time",
                    "an AllReduce on ATTN_TP has no process-group evidence" + detail],
        s.EVIDENCE: ["C[i][3] max/mean 2.1", "wait_ns rank 0 .. 7", "event_id 2" + detail],
    }), s.FINDINGS)


def _tables(a2a: list[tuple[int, np.ndarray]], measured: pa.Table) -> dict[str, pa.Table]:
    """The measure stage's extra tables: a2a_matrix, a2a, fits, stragglers."""
    n = a2a[0][1].shape[0]
    src, dst = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    matrix = pa.concat_tables([
        _table(n * n, s.A2A_MATRIX, {
            s.INSTANCE: inst, s.SRC_RANK: src.ravel(), s.DST_RANK: dst.ravel(),
            s.MSG_BYTES: c.ravel(),
            s.LINK_CLASS: np.where(src.ravel() == dst.ravel(), "local", "nvlink")})
        for inst, c in a2a])
    per_rank = [np.maximum(c.sum(axis=1), c.sum(axis=0)) for _, c in a2a]
    m = measured.to_pandas()
    disp = m[m[s.OP].astype(str) == s.Op.DISPATCH].groupby(s.INSTANCE).agg(
        transfer=(s.TRANSFER_NS, "first"), bound=(s.BOUND_NS, "first"),
        layer=(s.LAYER, "first"))
    a2a_rows = _table(len(a2a), s.A2A, {
        s.INSTANCE: [i for i, _ in a2a], s.OP: s.Op.DISPATCH, s.GROUP: s.Group.MOE_EP,
        s.PATH: PathLabel.DEEPEP_NORMAL_DISPATCH, s.PHASE: s.Phase.DISPATCH,
        s.LAYER: disp["layer"].to_numpy(), s.N_RANKS: n, s.LINK_CLASS: "nvlink",
        s.SEND_BYTES: [int(c.sum(axis=1).max()) for _, c in a2a],
        s.RECV_BYTES: [int(c.sum(axis=0).max()) for _, c in a2a],
        s.MEAN_BYTES: [float(r.mean()) for r in per_rank],
        s.IMBALANCE: [float(r.max() / r.mean()) for r in per_rank],
        s.TRANSFER_NS: disp["transfer"].to_numpy(), s.BOUND_NS: disp["bound"].to_numpy(),
    })
    waits = m.groupby(s.RANK)[s.WAIT_NS].sum()
    strag = _table(n, s.STRAGGLERS, {
        s.RANK: np.arange(n), s.COUNT: m.groupby(s.RANK)[s.INSTANCE].nunique().to_numpy(),
        s.LAST_COUNT: np.where(np.arange(n) == 5, len(a2a), 0),
        s.CAUSED_WAIT_NS: np.where(np.arange(n) == 5, int(waits.sum()), 0),
        s.WAIT_NS: waits.to_numpy(), s.SHARE: np.where(np.arange(n) == 5, 1.0, 0.0),
    })
    fits = _table(3, s.FITS, {
        s.GROUP: [s.Group.ATTN_TP, s.Group.MOE_EP, s.Group.MOE_EP],
        s.OP: [s.Op.ALL_REDUCE, s.Op.DISPATCH, s.Op.COMBINE], s.LINK_CLASS: "nvlink",
        s.COUNT: [12, 3, 3], s.ALPHA_NS: [4100.0, 5200.0, 5900.0], s.BW_GBPS: [230.0, 260.0, 255.0],
        s.PROFILE_ALPHA_NS: ALPHA_NS, s.PROFILE_BW_GBPS: BETA_B_PER_NS, s.METHOD: "theil-sen",
    })
    return {"a2a_matrix": matrix, "a2a": a2a_rows, "fits": fits, "stragglers": strag}


@pytest.fixture
def make_analysis() -> Callable[..., Analysis]:
    """The builder itself, for tests that need another size or hostile names."""
    return build_analysis


@pytest.fixture(scope="session")
def analysis() -> Analysis:
    """8 ranks, 3 layers: every table filled."""
    return build_analysis()


@pytest.fixture(scope="session")
def events_only() -> Analysis:
    """The same run with EVENTS only (no attribution, no measurement)."""
    return build_analysis(only_events=True)


@pytest.fixture(scope="session")
def evil_analysis() -> Analysis:
    """A run whose dispatch kernel, a thread name and a finding carry a script."""
    return build_analysis(evil=XSS_SCRIPT)


def _which(name: str) -> str | None:
    return shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)


@pytest.fixture(scope="session")
def chrome_driver() -> Any:
    """Headless Debian chromium through chromedriver; skips with the reason when absent."""
    chromium, driver_bin = _which("chromium"), _which("chromedriver")
    if not chromium or not driver_bin:
        pytest.skip("chromium/chromedriver not installed (make browser installs them with apt)")
    webdriver = pytest.importorskip("selenium.webdriver")
    import tempfile

    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="tracekit-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                 "--window-size=1400,1000"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        drv = webdriver.Chrome(service=Service(driver_bin), options=opts)
    except Exception as exc:  # the binary exists but cannot start here
        shutil.rmtree(profile, ignore_errors=True)
        pytest.skip(f"chromium cannot start: {str(exc).splitlines()[0]}")
    yield drv
    drv.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def fresh_python() -> Callable[[str], None]:
    """Runs a script in a new interpreter (nothing of this test process imported) and
    checks that it exited cleanly printing ``ok``."""
    def run(script: str) -> None:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             check=False, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "ok"
    return run


class BokehOracle:
    """bokeh itself as the reference for tracekit.reports.bokehjs: the same models built as
    bokeh's Python models, and both documents in one comparable form."""

    @staticmethod
    def to_bokeh(roots: list[Any]) -> list[Any]:
        """``roots`` (bokehjs.Model trees) as bokeh models, a model shared between roots one
        bokeh model: each its bokeh class, built from the same attributes (bokeh validates
        each, and keeps only those that differ from its defaults)."""
        import bokeh.models  # noqa: F401  (registers every model class by its name)
        from bokeh.model import Model as BokehModel

        from tracekit.reports.bokehjs import Map, Model

        classes = BokehModel.model_class_reverse_map

        made: dict[int, Any] = {}

        def convert(v: Any) -> Any:
            if isinstance(v, Model):
                if id(v) not in made:
                    made[id(v)] = classes[v.kind](**{
                        k: convert(x) for k, x in v.attributes.items()})
                return made[id(v)]
            if isinstance(v, Map):
                return {k: convert(x) for k, x in v.items()}
            # specs as one writes them for bokeh: a column name, a field through a
            # transform, a plain value (bokeh keeps them as given, then writes the spec)
            if isinstance(v, dict) and v.get("type") == "field":
                if "transform" in v:
                    return {"field": v["field"], "transform": convert(v["transform"])}
                return v["field"]
            if isinstance(v, dict) and v.get("type") == "value":
                return v["value"]
            if isinstance(v, (list, tuple)):
                return [convert(x) for x in v]
            return v

        return [convert(root) for root in roots]

    @staticmethod
    def objects(rep: Any) -> dict[str, dict[str, Any]]:
        """Every model written in full inside the serialised ``rep``, by its id."""
        found: dict[str, dict[str, Any]] = {}

        def collect(v: Any) -> None:
            if isinstance(v, dict):
                if v.get("type") == "object" and "id" in v:
                    found[v["id"]] = v
                for x in v.values():
                    collect(x)
            elif isinstance(v, list):
                for x in v:
                    collect(x)

        collect(rep)
        return found

    def graph(self, doc: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """A document's roots and models with ids renumbered in one traversal order (each
        model's attributes by name), so that two writers' documents compare with ==."""
        found = self.objects(doc["roots"])
        ids: dict[str, str] = {}
        models: dict[str, Any] = {}

        def walk(v: Any) -> Any:
            if isinstance(v, dict):
                if "id" in v and (set(v) == {"id"} or v.get("type") == "object"):
                    if v["id"] not in ids:
                        ids[v["id"]] = new = f"M{len(ids)}"
                        model = found[v["id"]]
                        attrs = model.get("attributes", {})
                        models[new] = (model["name"], {k: walk(attrs[k]) for k in sorted(attrs)})
                    return ("ref", ids[v["id"]])
                return {k: walk(v[k]) for k in sorted(v)}
            if isinstance(v, list):
                return [walk(x) for x in v]
            return v

        return [walk(r) for r in doc["roots"]], models

    def bokeh_document(self, roots: list[Any]) -> dict[str, Any]:
        """bokeh's own document JSON of ``roots`` converted to bokeh models."""
        import json

        from bokeh.core.json_encoder import serialize_json
        from bokeh.document import Document

        doc = Document()
        for root in self.to_bokeh(roots):
            doc.add_root(root)
        return json.loads(serialize_json(doc.to_json(deferred=False)))


@pytest.fixture(scope="session")
def bokeh_oracle() -> BokehOracle:
    pytest.importorskip("bokeh")
    return BokehOracle()
