"""The spine: every table tracekit passes between stages, declared once.

Each table is an Arrow schema whose fields carry a ``doc`` and a ``unit`` in their metadata.
Column names are exported as module constants; no other module spells a column name as a
string literal. Times are integer nanoseconds. Repeating strings are dictionary-encoded.

Tables (ARCHITECTURE.md "Data flow"):

* ``EVENTS``      one row per trace event of one rank (parsers produce it).
* ``ATTRIBUTED``  EVENTS plus the rules engine's verdict (kernel class, group, path, phase...).
* ``MEASURED``    one row per communication event with its bound, efficiency and wait.
* ``PHASES``      per (rank, phase) time totals, exposed communication and bound.
* ``FINDINGS``    lints: a rule, a severity, where, and the evidence.

Modules that need further tables (all-to-all matrices, fits, stragglers) declare them here too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa

from tracekit.errors import SchemaError

SCHEMA_VERSION = "2"
# EVENTS schema metadata of a Kineto rank: which reader read its file ("native", "msgspec",
# or "native+msgspec" when the native reader handed some blocks to msgspec)
READER_KEY = "reader"

_DICT = pa.dictionary(pa.int32(), pa.string())


def _f(name: str, typ: pa.DataType, doc: str, unit: str = "", nullable: bool = True) -> pa.Field:
    return pa.field(name, typ, nullable=nullable, metadata={"doc": doc, "unit": unit})


# --------------------------------------------------------------------------------------------
# Column names. Grouped by table; a name shared by two tables means the same thing in both.
# --------------------------------------------------------------------------------------------

# identity and placement
RANK = "rank"
SOURCE = "source"
PID = "pid"
TID = "tid"
DEVICE = "device"
STREAM = "stream"
THREAD = "thread"
EVENT_ID = "event_id"

# time
TS_NS = "ts_ns"
DUR_NS = "dur_ns"

# what it is
NAME = "name"
CATEGORY = "category"
KIND = "kind"

# links
CORRELATION = "correlation"
EXTERNAL_ID = "external_id"
PY_ID = "py_id"
PY_PARENT_ID = "py_parent_id"
CALL_SITE = "call_site"

# communication metadata (from the trace, never inferred by rules)
OP = "op"
COLL_NAME = "coll_name"
DTYPE = "dtype"
IN_NELEMS = "in_nelems"
OUT_NELEMS = "out_nelems"
IN_BYTES = "in_bytes"
OUT_BYTES = "out_bytes"
IN_SPLIT = "in_split"
OUT_SPLIT = "out_split"
GROUP_SIZE = "group_size"
PG_NAME = "pg_name"
PG_DESC = "pg_desc"
PG_RANKS = "pg_ranks"
SEQ = "seq"
COMMS_ID = "comms_id"
PEER_RANK = "peer_rank"
META_SOURCE = "meta_source"
# --- profiler's own per-op communication times (Ascend communication.json / analysis.db) ---
PROF_TRANSIT_NS = "prof_transit_ns"
PROF_WAIT_NS = "prof_wait_ns"
PROF_SYNC_NS = "prof_sync_ns"
PROF_IDLE_NS = "prof_idle_ns"

# attribution (ATTRIBUTED)
KERNEL_CLASS = "kernel_class"
KERNEL_ROLE = "kernel_role"
GROUP = "group"
PATH = "path"
PHASE = "phase"
LAYER = "layer"
LOGICAL_ID = "logical_id"
IS_INSTANCE = "is_instance"
RULE_ID = "rule_id"
STATUS = "status"
REASON = "reason"

# measurement (MEASURED, PHASES)
INSTANCE = "instance"
N_RANKS = "n_ranks"
MSG_BYTES = "msg_bytes"
LINK_CLASS = "link_class"
TRANSFER_NS = "transfer_ns"
WAIT_NS = "wait_ns"
NOTIFY_NS = "notify_ns"  # synchronisation kernels' time (DeepEP notify), counted in wait_ns
SKEW_NS = "skew_ns"
BOUND_NS = "bound_ns"
EFFICIENCY = "efficiency"
ALGBW_GBPS = "algbw_gbps"
BUSBW_GBPS = "busbw_gbps"
EXPOSED_NS = "exposed_ns"
COMM_NS = "comm_ns"
FUSED_NS = "fused_ns"
COMPUTE_NS = "compute_ns"
MEMCPY_NS = "memcpy_ns"
IDLE_NS = "idle_ns"
COUNT = "count"
LATENCY_BOUND = "latency_bound"  # measure
TIME_SOURCE = "time_source"  # coverage: where transfer / wait came from (schema.TimeSource)
BOUND_STATUS = "bound_status"  # coverage: why a bound / efficiency is there or not

# run metadata (PROCESS_GROUPS, RANK_INFO)
BACKEND = "backend"
WORLD_SIZE = "world_size"
GROUP_RANK = "group_rank"
FORMAT = "format"
BASE_TIME_NS = "base_time_ns"
HOST = "host"

# findings (FINDINGS)
SEVERITY = "severity"
RANKS = "ranks"
MESSAGE = "message"
EVIDENCE = "evidence"


# --------------------------------------------------------------------------------------------
# Enumerations (values of dictionary columns). Plain strings so that Parquet/JSON keep them.
# --------------------------------------------------------------------------------------------


class Kind:
    """Values of the ``kind`` column."""

    KERNEL = "kernel"
    CPU_OP = "cpu_op"
    PYTHON = "python"
    ANNOTATION = "annotation"
    GPU_ANNOTATION = "gpu_annotation"
    MEMCPY = "memcpy"
    MEMSET = "memset"
    RUNTIME = "runtime"
    COMM_OP = "comm_op"
    OTHER = "other"

    ALL = (
        KERNEL, CPU_OP, PYTHON, ANNOTATION, GPU_ANNOTATION, MEMCPY, MEMSET, RUNTIME, COMM_OP, OTHER,
    )


class Op:
    """Normalised collective operations (values of the ``op`` column)."""

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    ALL_GATHERV = "all_gatherv"
    REDUCE_SCATTER = "reduce_scatter"
    REDUCE_SCATTERV = "reduce_scatterv"
    ALL_TO_ALL = "all_to_all"
    ALL_TO_ALLV = "all_to_allv"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    SEND = "send"
    RECV = "recv"
    SEND_RECV = "send_recv"
    GATHER = "gather"
    SCATTER = "scatter"
    BARRIER = "barrier"
    DISPATCH = "dispatch"
    COMBINE = "combine"
    FUSED_MOE = "fused_moe"
    OTHER = "other"

    ALL = (
        ALL_REDUCE, ALL_GATHER, ALL_GATHERV, REDUCE_SCATTER, REDUCE_SCATTERV, ALL_TO_ALL,
        ALL_TO_ALLV, BROADCAST, REDUCE, SEND, RECV, SEND_RECV, GATHER, SCATTER, BARRIER,
        DISPATCH, COMBINE, FUSED_MOE, OTHER,
    )


class KernelClass:
    """Values of ``kernel_class``: what a span of device (or comm-thread) time was doing."""

    COMM = "communication"
    FUSED = "fused"
    COMPUTE = "compute"
    MEMCPY = "memcpy"
    OTHER = "other"

    ALL = (COMM, FUSED, COMPUTE, MEMCPY, OTHER)


class KernelRole:
    """Values of ``kernel_role`` that a measurement stage reads (the rest are rule data)."""

    # the synchronisation part of the collective it prepares (DeepEP notify_dispatch,
    # cached_notify, notify_combine: count exchange and barrier); its time is wait, not
    # transfer (MEASURED.notify_ns)
    NOTIFY = "notify"


class Status:
    """Values of ``status`` in ATTRIBUTED."""

    ATTRIBUTED = "attributed"
    AMBIGUOUS = "ambiguous"
    UNATTRIBUTED = "unattributed"

    ALL = (ATTRIBUTED, AMBIGUOUS, UNATTRIBUTED)


class Group:
    """Values of ``group``: the communicator, named as SGLang's parallel state names it."""

    TP = "TP"
    ATTN_TP = "ATTN_TP"
    ATTN_CP = "ATTN_CP"
    MOE_EP = "MOE_EP"
    MOE_TP = "MOE_TP"
    MOE_DP = "MOE_DP"
    DP = "DP"  # a native DP replica's group (DP attention off)
    PP = "PP"
    WORLD = "WORLD"
    # Megatron-core's data-parallel group with context parallel (``dp-cp``: the gradient
    # reduction group when cp > 1); folded onto DP when cp == 1 (same members, same role)
    DP_CP = "DP_CP"

    ALL = (TP, ATTN_TP, ATTN_CP, MOE_EP, MOE_TP, MOE_DP, DP, PP, WORLD, DP_CP)


class Phase:
    """Values of ``phase``."""

    ATTENTION_REDUCE = "attention_reduce"
    DP_GATHER = "dp_gather"
    DISPATCH = "dispatch"
    EXPERTS = "experts"
    COMBINE = "combine"
    OTHER = "other"

    ALL = (ATTENTION_REDUCE, DP_GATHER, DISPATCH, EXPERTS, COMBINE, OTHER)


# Path labels (the values of ``path``) are rule data: declared with their phase and family in
# tracekit/rules/data/paths.yaml (``path_labels``) and extended by user rule files; ``path`` is
# an open string validated against the loaded rules. The packaged labels by constant name are
# tracekit.rules.labels.PathLabel (the schema imports nothing above it).


class MetaSource:
    """Where an event's communication metadata came from (``meta_source``)."""

    ARGS = "args"  # the event's own args (record_param_comms, or kineto-enriched kernel)
    LINKED = "linked"  # copied from the record_param_comms op that launched it
    INPUTS = "inputs"  # c10d op Concrete Inputs / Input Dims (gloo)
    NAME = "name"  # only the kernel / op name says what it is
    ASCEND = "ascend"  # Ascend profiler export (HCCL op tables)
    FLIGHT_RECORDER = "flight_recorder"  # communicator and seq from a Flight Recorder dump


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------

_I64_LIST = pa.list_(pa.int64())
_I32_LIST = pa.list_(pa.int32())

EVENTS = pa.schema(
    [
        _f(RANK, pa.int32(), "global rank of the process that wrote the trace", nullable=False),
        _f(SOURCE, _DICT, "path of the file the event came from"),
        _f(EVENT_ID, pa.int64(), "index of the event within its rank (stable per file)",
           nullable=False),
        _f(PID, pa.int64(), "trace pid: host process id, or the device index for GPU events"),
        _f(TID, pa.int64(), "trace tid: host thread id, or the stream id for GPU events"),
        _f(DEVICE, pa.int32(), "device (GPU/NPU) index for device events, null on the host"),
        _f(STREAM, pa.int64(), "device stream id for device events, null on the host"),
        _f(THREAD, _DICT, "thread or stream name from the trace metadata"),
        _f(TS_NS, pa.int64(), "start time, exact integer nanoseconds", "ns", nullable=False),
        _f(DUR_NS, pa.int64(), "duration, exact integer nanoseconds", "ns", nullable=False),
        _f(NAME, _DICT, "event name as written in the trace"),
        _f(CATEGORY, _DICT, "trace category (cat) as written"),
        _f(KIND, _DICT, "normalised kind, one of schema.Kind"),
        _f(CORRELATION, pa.int64(), "CUDA/CANN correlation id linking a launch and its kernel"),
        _f(EXTERNAL_ID, pa.int64(), "External id: the linked CPU op of a kernel or launch"),
        _f(PY_ID, pa.int64(), "python_function id (Python id)"),
        _f(PY_PARENT_ID, pa.int64(), "python_function parent id (Python parent id)"),
        _f(CALL_SITE, _DICT, "innermost user python frames enclosing the event, ' <- ' joined"),
        _f(OP, _DICT, "normalised collective, one of schema.Op; null when not communication"),
        _f(COLL_NAME, _DICT, "raw collective name from the args ('allreduce', '_allgather_base')"),
        _f(DTYPE, _DICT, "element type as the trace names it ('Float', 'BFloat16', 'FP32')"),
        _f(IN_NELEMS, pa.int64(), "input element count", "elements"),
        _f(OUT_NELEMS, pa.int64(), "output element count", "elements"),
        _f(IN_BYTES, pa.int64(), "input bytes = in_nelems x dtype size", "B"),
        _f(OUT_BYTES, pa.int64(), "output bytes = out_nelems x dtype size", "B"),
        _f(IN_SPLIT, _I64_LIST, "input split sizes of a v-collective (first dim rows)", "rows"),
        _f(OUT_SPLIT, _I64_LIST, "output split sizes of a v-collective (first dim rows)", "rows"),
        _f(GROUP_SIZE, pa.int32(), "number of ranks in the process group", "ranks"),
        _f(PG_NAME, _DICT, "process group name (torch pg_name / HCCL group hash)"),
        _f(PG_DESC, _DICT, "process group description ('tp:device', 'default_pg')"),
        _f(PG_RANKS, _I32_LIST, "global ranks of the process group"),
        _f(SEQ, pa.int64(), "per-group sequence number when the trace has it"),
        _f(COMMS_ID, pa.uint64(), "Comms Id: the same on every rank of one collective"),
        _f(PEER_RANK, pa.int32(), "peer global rank of a send/recv (or root of broadcast/reduce)"),
        _f(META_SOURCE, _DICT, "where the communication metadata came from, schema.MetaSource"),
        _f(PROF_TRANSIT_NS, pa.int64(), "the exporting profiler's own transfer time of this op on "
           "this rank (Ascend Transit Time: time on the SDMA + RDMA links); null when the "
           "trace has none", "ns"),
        _f(PROF_WAIT_NS, pa.int64(), "the profiler's own wait time of this op on this rank "
           "(Ascend Wait Time: all notify waits); null when the trace has none", "ns"),
        _f(PROF_SYNC_NS, pa.int64(), "the profiler's own synchronisation time (Ascend "
           "Synchronization Time: wait before the first transfer, part of the wait)", "ns"),
        _f(PROF_IDLE_NS, pa.int64(), "the profiler's own idle time of the op (Ascend Idle "
           "Time = Elapse - Transit - Wait)", "ns"),
    ],
    metadata={"table": "EVENTS", "schema_version": SCHEMA_VERSION},
)

ATTRIBUTION_FIELDS = [
    _f(KERNEL_CLASS, _DICT, "communication, fused, compute, memcpy or other (schema.KernelClass)"),
    _f(KERNEL_ROLE, _DICT, "role inside a library: layout, notify, dispatch, combine..."),
    _f(GROUP, _DICT, "communicator: TP, ATTN_TP, ATTN_CP, MOE_EP, MOE_TP, MOE_DP, DP, PP, WORLD"),
    _f(PATH, _DICT, "execution path of the event (a path label declared in the loaded rules)"),
    _f(PHASE, _DICT, "attention_reduce, dp_gather, dispatch, experts, combine or other"),
    _f(LAYER, pa.int32(), "decoder layer index, null when the event is outside any layer"),
    _f(LOGICAL_ID, pa.int64(), "one id for kernels that form one logical collective"),
    _f(IS_INSTANCE, pa.bool_(), "this row carries the collective's time on its rank: the device "
       "kernel, the gloo runloop annotation or the HCCL op (not the CPU wrappers around it)"),
    _f(RULE_ID, _DICT, "id of the rule that decided group/path"),
    _f(STATUS, _DICT, "attributed, ambiguous or unattributed (schema.Status)"),
    _f(REASON, _DICT, "the evidence chain, candidates listed when ambiguous"),
]

ATTRIBUTED = pa.schema(
    list(EVENTS) + ATTRIBUTION_FIELDS,
    metadata={"table": "ATTRIBUTED", "schema_version": SCHEMA_VERSION},
)

MEASURED = pa.schema(
    [
        _f(RANK, pa.int32(), "global rank", nullable=False),
        _f(EVENT_ID, pa.int64(), "the communication event (EVENTS.event_id) on that rank"),
        _f(INSTANCE, pa.int64(), "one id per collective instance across ranks"),
        _f(NAME, _DICT, "event name"),
        _f(OP, _DICT, "normalised collective"),
        _f(GROUP, _DICT, "communicator"),
        _f(PATH, _DICT, "execution path"),
        _f(PHASE, _DICT, "phase"),
        _f(LAYER, pa.int32(), "decoder layer"),
        _f(KERNEL_CLASS, _DICT, "communication or fused"),
        _f(TS_NS, pa.int64(), "start", "ns"),
        _f(DUR_NS, pa.int64(), "duration on this rank", "ns"),
        _f(MSG_BYTES, pa.int64(), "message size S (nccl-tests convention)", "B"),
        _f(N_RANKS, pa.int32(), "ranks taking part", "ranks"),
        _f(LINK_CLASS, _DICT, "link class used for the bound (nvlink, ib, hccs, pcie, gloo...)"),
        _f(TRANSFER_NS, pa.int64(), "transfer time: the minimum duration over the ranks seen, "
           "or the profiler's own transit time (time_source); null when it cannot be told "
           "from wait (one member of a larger communicator seen)", "ns"),
        _f(WAIT_NS, pa.int64(), "this rank's duration minus the transfer time (the profiler's "
           "wait when time_source is 'profiler'), plus notify_ns; null when transfer is null",
           "ns"),
        _f(NOTIFY_NS, pa.int64(), "time of the synchronisation kernels that prepare this "
           "collective on this rank (kernel_role notify: DeepEP notify_dispatch, cached_notify, "
           "notify_combine); wait, not transfer: included in wait_ns, not in dur_ns "
           "(transfer + wait = dur + notify); 0 when none", "ns"),
        _f(SKEW_NS, pa.int64(), "this rank's start minus the earliest start of the instance; "
           "null when no other member was seen", "ns"),
        _f(BOUND_NS, pa.int64(), "alpha-beta lower bound for this collective over the "
           "communicator's real size and known bytes; null when either is unknown", "ns"),
        _f(EFFICIENCY, pa.float64(), "bound / transfer time; null when either is unknown or "
           "the ratio is physically impossible (bound_status)", "ratio"),
        _f(ALGBW_GBPS, pa.float64(), "S / transfer time", "GB/s (1e9)"),
        _f(BUSBW_GBPS, pa.float64(), "algbw x nccl-tests bus factor", "GB/s (1e9)"),
        _f(EXPOSED_NS, pa.int64(), "part not overlapped by compute on the same device", "ns"),
        _f(LATENCY_BOUND, pa.bool_(), "the bound's latency term alpha is at least its "
           "bandwidth term: efficiency then compares with a modelled latency"),
        _f(TIME_SOURCE, _DICT, "where transfer and wait came from (schema.TimeSource); null: "
           "not separable"),
        _f(BOUND_STATUS, _DICT, "why the bound and efficiency are there or null "
           "(schema.BoundStatus)"),
    ],
    metadata={"table": "MEASURED", "schema_version": SCHEMA_VERSION},
)

PHASES = pa.schema(
    [
        _f(RANK, pa.int32(), "global rank; null for the all-rank total"),
        _f(PHASE, _DICT, "phase"),
        _f(LAYER, pa.int32(), "decoder layer; null for all layers"),
        _f(COUNT, pa.int64(), "communication events in the phase"),
        _f(MSG_BYTES, pa.int64(), "bytes moved (sum of S)", "B"),
        _f(COMM_NS, pa.int64(), "pure communication time", "ns"),
        _f(FUSED_NS, pa.int64(), "fused compute-plus-exchange time", "ns"),
        _f(COMPUTE_NS, pa.int64(), "compute time", "ns"),
        _f(MEMCPY_NS, pa.int64(), "memcpy / memset time", "ns"),
        _f(EXPOSED_NS, pa.int64(), "communication not overlapped by compute", "ns"),
        _f(TRANSFER_NS, pa.int64(), "sum of transfer times", "ns"),
        _f(WAIT_NS, pa.int64(), "sum of waits (DeepEP notify time included)", "ns"),
        _f(NOTIFY_NS, pa.int64(), "sum of the notify (synchronisation) kernels' time, "
           "part of wait_ns", "ns"),
        _f(BOUND_NS, pa.int64(), "sum of bounds", "ns"),
        _f(EFFICIENCY, pa.float64(), "bound / transfer time over the phase", "ratio"),
    ],
    metadata={"table": "PHASES", "schema_version": SCHEMA_VERSION},
)

FINDINGS = pa.schema(
    [
        _f(RULE_ID, _DICT, "lint rule id", nullable=False),
        _f(SEVERITY, _DICT, "error, warning or info"),
        _f(LAYER, pa.int32(), "decoder layer, null when not layer-specific"),
        _f(RANKS, _I32_LIST, "ranks where it was seen"),
        _f(GROUP, _DICT, "communicator concerned"),
        _f(PATH, _DICT, "path concerned"),
        _f(MESSAGE, pa.string(), "one sentence for a person"),
        _f(EVIDENCE, pa.string(), "the events and facts that support it"),
    ],
    metadata={"table": "FINDINGS", "schema_version": SCHEMA_VERSION},
)

PROCESS_GROUPS = pa.schema(
    [
        _f(RANK, pa.int32(), "rank whose trace declared the group", nullable=False),
        _f(PG_NAME, _DICT, "process group name (torch pg_name, HCCL communicator name)"),
        _f(PG_DESC, _DICT, "description (torch pg_desc / group_desc, HCCL group_name)"),
        _f(PG_RANKS, _I32_LIST, "global ranks of the group"),
        _f(GROUP_SIZE, pa.int32(), "group size", "ranks"),
        _f(GROUP_RANK, pa.int32(), "this rank's index in the group"),
        _f(BACKEND, _DICT, "backend config ('cpu:gloo,cuda:gloo', 'cuda:nccl', 'hccl')"),
    ],
    metadata={"table": "PROCESS_GROUPS", "schema_version": SCHEMA_VERSION},
)

RANK_INFO = pa.schema(
    [
        _f(RANK, pa.int32(), "global rank", nullable=False),
        _f(SOURCE, pa.string(), "file or directory the rank was read from"),
        _f(FORMAT, _DICT, "kineto or ascend"),
        _f(BACKEND, _DICT, "distributed backend (nccl, gloo, hccl)"),
        _f(WORLD_SIZE, pa.int32(), "world size the trace declares"),
        _f(HOST, _DICT, "host name"),
        _f(BASE_TIME_NS, pa.int64(), "epoch offset of ts_ns (baseTimeNanoseconds)", "ns"),
        _f(COUNT, pa.int64(), "events read"),
    ],
    metadata={"table": "RANK_INFO", "schema_version": SCHEMA_VERSION},
)

TABLES: dict[str, pa.Schema] = {
    "EVENTS": EVENTS,
    "ATTRIBUTED": ATTRIBUTED,
    "MEASURED": MEASURED,
    "PHASES": PHASES,
    "FINDINGS": FINDINGS,
    "PROCESS_GROUPS": PROCESS_GROUPS,
    "RANK_INFO": RANK_INFO,
}

# --- measure --- (tracekit.measure: time classes, all-to-all matrices, fits, stragglers)

SPAN_NS = "span_ns"
SRC_RANK = "src_rank"
DST_RANK = "dst_rank"
SEND_BYTES = "send_bytes"
RECV_BYTES = "recv_bytes"
MEAN_BYTES = "mean_bytes"
IMBALANCE = "imbalance"
BALANCED_NS = "balanced_ns"
LOST_IMBALANCE_NS = "lost_imbalance_ns"
LOST_LINKS_NS = "lost_links_ns"
ALPHA_NS = "alpha_ns"
BW_GBPS = "bw_gbps"
PROFILE_ALPHA_NS = "profile_alpha_ns"
PROFILE_BW_GBPS = "profile_bw_gbps"
METHOD = "method"
LAST_COUNT = "last_count"
CAUSED_WAIT_NS = "caused_wait_ns"
SHARE = "share"

TIME_CLASSES = pa.schema(
    [
        _f(RANK, pa.int32(), "global rank", nullable=False),
        _f(PID, pa.int64(), "the device: trace pid of a GPU/NPU (device index) or, on CPU-only "
           "traces, the host process"),
        _f(TID, pa.int64(), "stream (GPU) or thread (CPU); null for the whole device"),
        _f(SPAN_NS, pa.int64(), "first start to last end of busy time on the device", "ns"),
        _f(COMM_NS, pa.int64(), "pure communication busy time (union of intervals)", "ns"),
        _f(FUSED_NS, pa.int64(), "fused compute-plus-exchange busy time", "ns"),
        _f(COMPUTE_NS, pa.int64(), "compute busy time", "ns"),
        _f(MEMCPY_NS, pa.int64(), "memcpy / memset busy time", "ns"),
        _f(IDLE_NS, pa.int64(), "span minus the union of all busy time", "ns"),
        _f(EXPOSED_NS, pa.int64(), "communication not overlapped by compute or fused time on "
           "the same device", "ns"),
    ],
    metadata={"table": "TIME_CLASSES", "schema_version": SCHEMA_VERSION},
)

A2A_MATRIX = pa.schema(
    [
        _f(INSTANCE, pa.int64(), "collective instance (MEASURED.instance)", nullable=False),
        _f(SRC_RANK, pa.int32(), "global rank that sends", nullable=False),
        _f(DST_RANK, pa.int32(), "global rank that receives", nullable=False),
        _f(MSG_BYTES, pa.int64(), "bytes C[src][dst]", "B"),
        _f(LINK_CLASS, _DICT, "link class between src and dst (self traffic: 'local')"),
    ],
    metadata={"table": "A2A_MATRIX", "schema_version": SCHEMA_VERSION},
)

A2A = pa.schema(
    [
        _f(INSTANCE, pa.int64(), "collective instance (MEASURED.instance)", nullable=False),
        _f(OP, _DICT, "normalised collective"),
        _f(GROUP, _DICT, "communicator"),
        _f(PATH, _DICT, "execution path"),
        _f(PHASE, _DICT, "phase"),
        _f(LAYER, pa.int32(), "decoder layer"),
        _f(N_RANKS, pa.int32(), "ranks taking part", "ranks"),
        _f(LINK_CLASS, _DICT, "link class these bytes cross"),
        _f(SEND_BYTES, pa.int64(), "busiest rank's bytes sent over this link class", "B"),
        _f(RECV_BYTES, pa.int64(), "busiest rank's bytes received over this link class", "B"),
        _f(MEAN_BYTES, pa.float64(), "mean over ranks of max(send, recv) on this link class", "B"),
        _f(IMBALANCE, pa.float64(), "max / mean of per-rank max(send, recv)", "ratio"),
        _f(TRANSFER_NS, pa.int64(), "transfer time of the instance (min over ranks)", "ns"),
        _f(BOUND_NS, pa.int64(), "alpha + busiest rank's bytes / bandwidth", "ns"),
        _f(BALANCED_NS, pa.int64(), "alpha + mean bytes / bandwidth: the bound if balanced", "ns"),
        _f(LOST_IMBALANCE_NS, pa.int64(), "(max - mean) bytes / bandwidth", "ns"),
        _f(LOST_LINKS_NS, pa.int64(), "transfer - bound: time the links were under-used", "ns"),
    ],
    metadata={"table": "A2A", "schema_version": SCHEMA_VERSION},
)

FITS = pa.schema(
    [
        _f(GROUP, _DICT, "communicator"),
        _f(OP, _DICT, "normalised collective"),
        _f(LINK_CLASS, _DICT, "link class"),
        _f(COUNT, pa.int64(), "matched instances used in the fit"),
        _f(ALPHA_NS, pa.float64(), "fitted latency (intercept)", "ns"),
        _f(BW_GBPS, pa.float64(), "fitted bus bandwidth 1 / slope of transfer vs bus bytes; null "
           "when the sizes do not vary", "GB/s (1e9)"),
        _f(PROFILE_ALPHA_NS, pa.float64(), "the hardware profile's alpha", "ns"),
        _f(PROFILE_BW_GBPS, pa.float64(), "the hardware profile's achievable bus bandwidth",
           "GB/s (1e9)"),
        _f(METHOD, _DICT, "fit method (theil-sen, median when the sizes do not vary)"),
        _f(REASON, pa.string(), "why no fit was made (alpha and bandwidth null), else null"),
    ],
    metadata={"table": "FITS", "schema_version": SCHEMA_VERSION},
)

STRAGGLERS = pa.schema(
    [
        _f(RANK, pa.int32(), "global rank", nullable=False),
        _f(COUNT, pa.int64(), "matched multi-rank instances the rank took part in"),
        _f(LAST_COUNT, pa.int64(), "instances where this rank started last"),
        _f(CAUSED_WAIT_NS, pa.int64(), "other ranks' wait in the instances it started last", "ns"),
        _f(WAIT_NS, pa.int64(), "this rank's own total wait", "ns"),
        _f(SHARE, pa.float64(), "caused wait / all ranks' wait", "ratio"),
    ],
    metadata={"table": "STRAGGLERS", "schema_version": SCHEMA_VERSION},
)

TABLES.update(
    {
        "TIME_CLASSES": TIME_CLASSES,
        "A2A_MATRIX": A2A_MATRIX,
        "A2A": A2A,
        "FITS": FITS,
        "STRAGGLERS": STRAGGLERS,
    }
)

# --- end measure ---

# --- ascend --- (tracekit.parsers.ascend: communication.json / analysis.db side tables, Run.extra)
# Keys of Run.extra: "ascend_comm_ops" (ASCEND_COMM_OPS), "ascend_comm_bandwidth"
# (ASCEND_COMM_BANDWIDTH), "ascend_comm_matrix" (ASCEND_COMM_MATRIX), "ascend_devices"
# (ASCEND_DEVICES). Join to EVENTS on (rank, event_id): the HCCL op row the numbers belong to.

GROUP_HASH = "group_hash"
STEP = "step"
COMM_KIND = "comm_kind"
SYNC_NS = "sync_ns"
TRANSPORT = "transport"
TRANSIT_BYTES = "transit_bytes"
BANDWIDTH_GBPS = "bandwidth_gbps"
IN_SDMA = "in_sdma"
HCCL_OP = "hccl_op"

ASCEND_COMM_OPS = pa.schema(
    [
        _f(RANK, pa.int32(), "global rank", nullable=False),
        _f(EVENT_ID, pa.int64(), "the HCCL op in EVENTS (null when no event matched)"),
        _f(NAME, _DICT, "HCCL op name (hcom_allReduce__586_0_1)"),
        _f(GROUP_HASH, _DICT, "communicator hash after '@' = double_hash(HCCL comm name)"),
        _f(PG_NAME, _DICT, "HCCL communicator name when parallel_group_info resolves the hash"),
        _f(STEP, _DICT, "step key ('step50', or 'step' when the run had no steps)"),
        _f(COMM_KIND, _DICT, "'collective' or 'p2p'"),
        _f(TS_NS, pa.int64(), "Start Timestamp(us) (the JSON literal, exact)", "ns"),
        _f(DUR_NS, pa.int64(), "Elapse Time: the whole op", "ns"),
        _f(TRANSFER_NS, pa.int64(), "Transit Time: time on the SDMA + RDMA links", "ns"),
        _f(WAIT_NS, pa.int64(), "Wait Time: all notify waits of the op on this rank", "ns"),
        _f(SYNC_NS, pa.int64(), "Synchronization Time: wait before the first transfer", "ns"),
        _f(IDLE_NS, pa.int64(), "Idle Time = Elapse - Transit - Wait", "ns"),
    ],
    metadata={"table": "ASCEND_COMM_OPS", "schema_version": SCHEMA_VERSION},
)

ASCEND_COMM_BANDWIDTH = pa.schema(
    [
        _f(RANK, pa.int32(), "global rank", nullable=False),
        _f(EVENT_ID, pa.int64(), "the HCCL op in EVENTS (null when no event matched)"),
        _f(NAME, _DICT, "HCCL op name"),
        _f(GROUP_HASH, _DICT, "communicator hash"),
        _f(STEP, _DICT, "step key"),
        _f(TRANSPORT, _DICT, "RDMA, HCCS, PCIE, SDMA or SIO"),
        _f(IN_SDMA, pa.bool_(), "HCCS, PCIE and SIO are already inside SDMA: never add them to it"),
        _f(TRANSIT_BYTES, pa.int64(), "Transit Size (MB = 1e6 B)", "B"),
        _f(TRANSFER_NS, pa.int64(), "Transit Time on this transport", "ns"),
        _f(BANDWIDTH_GBPS, pa.float64(), "Bandwidth as written (MB/ms)", "GB/s (1e9)"),
    ],
    metadata={"table": "ASCEND_COMM_BANDWIDTH", "schema_version": SCHEMA_VERSION},
)

ASCEND_COMM_MATRIX = pa.schema(
    [
        _f(RANK, pa.int32(), "global rank whose export holds the link", nullable=False),
        _f(NAME, _DICT, "matrix key: 'allreduce-top1' style bucket or an HCCL op name"),
        _f(HCCL_OP, _DICT, "Op Name of the bucket's representative op (null for totals)"),
        _f(GROUP_HASH, _DICT, "communicator hash"),
        _f(STEP, _DICT, "step key"),
        _f(COMM_KIND, _DICT, "'collective' or 'p2p'"),
        _f(SRC_RANK, pa.int32(), "source rank, local to the group"),
        _f(DST_RANK, pa.int32(), "destination rank, local to the group"),
        _f(TRANSPORT, _DICT, "HCCS, PCIE, RDMA, LOCAL or SIO"),
        _f(TRANSIT_BYTES, pa.int64(), "Transit Size (MB = 1e6 B)", "B"),
        _f(TRANSFER_NS, pa.int64(), "Transit Time", "ns"),
        _f(BANDWIDTH_GBPS, pa.float64(), "Bandwidth as written", "GB/s (1e9)"),
    ],
    metadata={"table": "ASCEND_COMM_MATRIX", "schema_version": SCHEMA_VERSION},
)

DEVICE_MODEL = "device_model"

ASCEND_DEVICES = pa.schema(
    [
        _f(RANK, pa.int32(), "global rank", nullable=False),
        _f(DEVICE, pa.int32(), "NPU index of the rank (db RANK_DEVICE_MAP, or trace_view pids)"),
        _f(DEVICE_MODEL, _DICT, "NPU model as the export names it (db NPU_INFO: 'Ascend910B')"),
    ],
    metadata={"table": "ASCEND_DEVICES", "schema_version": SCHEMA_VERSION},
)

TABLES.update(
    {
        "ASCEND_COMM_OPS": ASCEND_COMM_OPS,
        "ASCEND_COMM_BANDWIDTH": ASCEND_COMM_BANDWIDTH,
        "ASCEND_COMM_MATRIX": ASCEND_COMM_MATRIX,
        "ASCEND_DEVICES": ASCEND_DEVICES,
    }
)

# --- end ascend ---

# --- rules --- (tracekit.topology and tracekit.rules: rank coordinates, summaries)

NODE = "node"
LOCAL_DEVICE = "local_device"
DP_RANK = "dp_rank"
PP_RANK = "pp_rank"
TP_RANK = "tp_rank"
ATTN_DP_RANK = "attn_dp_rank"
ATTN_CP_RANK = "attn_cp_rank"
ATTN_TP_RANK = "attn_tp_rank"
MOE_DP_RANK = "moe_dp_rank"
MOE_EP_RANK = "moe_ep_rank"
MOE_TP_RANK = "moe_tp_rank"
MEMBERS = "members"
ALIAS_OF = "alias_of"
AMBIGUOUS_COUNT = "ambiguous_count"
UNATTRIBUTED_COUNT = "unattributed_count"

RANK_COORDS = pa.schema(
    [
        _f(RANK, pa.int32(), "global rank", nullable=False),
        _f(NODE, pa.int32(), "node index (rank // devices per node)"),
        _f(LOCAL_DEVICE, pa.int32(), "device index within the node"),
        _f(DP_RANK, pa.int32(), "native DP replica (DP attention off); 0 otherwise"),
        _f(PP_RANK, pa.int32(), "pipeline stage"),
        _f(TP_RANK, pa.int32(), "rank inside its TP group"),
        _f(ATTN_DP_RANK, pa.int32(), "attention DP shard (tp_rank // (attn_tp * attn_cp))"),
        _f(ATTN_CP_RANK, pa.int32(), "attention context-parallel rank"),
        _f(ATTN_TP_RANK, pa.int32(), "rank inside the attention TP group (fastest)"),
        _f(MOE_DP_RANK, pa.int32(), "MoE data-parallel rank"),
        _f(MOE_EP_RANK, pa.int32(), "MoE expert-parallel rank"),
        _f(MOE_TP_RANK, pa.int32(), "MoE tensor-parallel rank (fastest)"),
    ],
    metadata={"table": "RANK_COORDS", "schema_version": SCHEMA_VERSION},
)

GROUP_MEMBERS = pa.schema(
    [
        _f(GROUP, _DICT, "communicator role (schema.Group)", nullable=False),
        _f(MEMBERS, _I32_LIST, "global ranks of one instance of the group, in group order"),
        _f(ALIAS_OF, _DICT, "the group this one IS (same communicator), null when distinct"),
    ],
    metadata={"table": "GROUP_MEMBERS", "schema_version": SCHEMA_VERSION},
)

COMM_SUMMARY = pa.schema(
    [
        _f(GROUP, _DICT, "communicator (null: not attributed)"),
        _f(PATH, _DICT, "execution path (null in the per-group table)"),
        _f(OP, _DICT, "normalised collective (null in the per-group/per-path tables)"),
        _f(COUNT, pa.int64(), "collective instances summed over ranks (logical collectives)"),
        _f(N_RANKS, pa.int32(), "ranks where they were seen", "ranks"),
        _f(MSG_BYTES, pa.int64(), "bytes summed over instances and ranks", "B"),
        _f(COMM_NS, pa.int64(), "time of the instances summed over ranks", "ns"),
        _f(AMBIGUOUS_COUNT, pa.int64(), "instances whose group stayed ambiguous"),
        _f(UNATTRIBUTED_COUNT, pa.int64(), "instances with no group"),
    ],
    metadata={"table": "COMM_SUMMARY", "schema_version": SCHEMA_VERSION},
)

STEP_INDEX = "step_index"
ORDER_TS_NS = "order_ts_ns"
LOGICAL_OP = "logical_op"

# One row per collective unit of a rank after attribution (the collective as the rank issued
# it: the wrapper on gloo, else the instance): what the lints read. The partitioned pipeline
# (tracekit.pipeline.partitioned) writes it per rank so that lints run once over all ranks.
COLLECTIVE_UNITS = pa.schema(
    [
        _f(RANK, pa.int32(), "global rank", nullable=False),
        _f(LOGICAL_ID, pa.int64(), "logical collective id (unique within the rank)"),
        _f(TS_NS, pa.int64(), "start of the unit's row", "ns"),
        _f(ORDER_TS_NS, pa.int64(), "issue time used to order the rank's collectives (a "
           "kernel's host launch)", "ns"),
        _f(STEP_INDEX, pa.int64(), "profiler step the unit falls in, null outside any step"),
        _f(LAYER, pa.int32(), "decoder layer"),
        _f(GROUP, _DICT, "communicator"),
        _f(PATH, _DICT, "execution path"),
        _f(LOGICAL_OP, _DICT, "op of the logical collective (reduce x N -> reduce_scatterv)"),
        _f(PG_RANKS, _I32_LIST, "global ranks of the process group, when the trace says"),
    ],
    metadata={"table": "COLLECTIVE_UNITS", "schema_version": SCHEMA_VERSION},
)

TABLES.update(
    {"RANK_COORDS": RANK_COORDS, "GROUP_MEMBERS": GROUP_MEMBERS, "COMM_SUMMARY": COMM_SUMMARY,
     "COLLECTIVE_UNITS": COLLECTIVE_UNITS}
)

# --- end rules ---

# --- flight recorder --- (tracekit.parsers.flight_recorder: torch c10d Flight Recorder dumps)

RECORD_ID = "record_id"
IS_P2P = "is_p2p"
IN_SIZES = "in_sizes"
OUT_SIZES = "out_sizes"
IN_DTYPES = "in_dtypes"
OUT_DTYPES = "out_dtypes"
FR_STATE = "fr_state"
RETIRED = "retired"
STARTED_NS = "started_ns"
COMPLETED_NS = "completed_ns"
TIMEOUT_NS = "timeout_ns"
FR_VERSION = "fr_version"
MEMBERS_SOURCE = "members_source"

_SIZES = pa.list_(pa.list_(pa.int64()))
_STR_LIST = pa.list_(pa.string())

# One row per Flight Recorder entry of one rank's dump, in the dump's order (oldest first).
FR = pa.schema(
    [
        _f(RANK, pa.int32(), "global rank whose dump holds the entry (from the file name)",
           nullable=False),
        _f(SOURCE, _DICT, "path of the dump file"),
        _f(RECORD_ID, pa.int64(), "record_id: the entry's index in the rank's recorder"),
        _f(PG_NAME, _DICT, "process group name (process_group[0])"),
        _f(PG_DESC, _DICT, "process group description (process_group[1], 'tp:device')"),
        _f(PG_RANKS, _I32_LIST, "global ranks of the group: the dump's pg_config, else the "
           "capture's groups file; null when neither says"),
        _f(MEMBERS_SOURCE, _DICT, "where pg_ranks came from: pg_config, groups_file or null"),
        _f(SEQ, pa.int64(), "per-group sequence id: collective_seq_id, or p2p_seq_id for p2p"),
        _f(IS_P2P, pa.bool_(), "point-to-point entry (is_p2p, else the op is send/recv)"),
        _f(OP, _DICT, "normalised collective, one of schema.Op (from profiling_name)"),
        _f(COLL_NAME, _DICT, "profiling_name as written ('gloo:all_reduce', 'nccl:send 0->1')"),
        _f(IN_SIZES, _SIZES, "input tensor shapes"),
        _f(OUT_SIZES, _SIZES, "output tensor shapes"),
        _f(IN_DTYPES, _STR_LIST, "input element types ('Float', 'BFloat16')"),
        _f(OUT_DTYPES, _STR_LIST, "output element types"),
        _f(IN_NELEMS, pa.int64(), "input element count (all input tensors)", "elements"),
        _f(OUT_NELEMS, pa.int64(), "output element count (all output tensors)", "elements"),
        _f(FR_STATE, _DICT, "state: scheduled, started or completed (gloo leaves 'scheduled')"),
        _f(RETIRED, pa.bool_(), "the backend no longer tracks the work (finished or failed)"),
        _f(TS_NS, pa.int64(), "time_created_ns: when the entry was enqueued, epoch", "ns"),
        _f(STARTED_NS, pa.int64(), "time_discovered_started_ns, epoch; null when unknown", "ns"),
        _f(COMPLETED_NS, pa.int64(), "time_discovered_completed_ns, epoch; null when unknown",
           "ns"),
        _f(DUR_NS, pa.int64(), "duration_ms (timing enabled) in ns; null when absent", "ns"),
        _f(TIMEOUT_NS, pa.int64(), "timeout_ms of the work, in ns", "ns"),
        _f(THREAD, _DICT, "thread_name of the issuing thread (format 2.9+)"),
        _f(CALL_SITE, _DICT, "innermost user frames of the entry's stack, ' <- ' joined "
           "(as EVENTS.call_site)"),
        _f(FR_VERSION, _DICT, "the dump's format version ('2.10')"),
    ],
    metadata={"table": "FR", "schema_version": SCHEMA_VERSION},
)

TABLES.update({"FR": FR})

# --- end flight recorder ---
# --- coverage --- (tracekit.measure.coverage and .evidence: what the figures rest on)

SCOPE = "scope"
SIZE_SOURCE = "size_source"
RANKS_PRESENT = "ranks_present"
RANKS_ABSENT = "ranks_absent"
MISSING_RANKS = "missing_ranks"
WITH_BYTES = "with_bytes"
WITH_COMM_META = "with_comm_meta"
WITH_CALL_SITE = "with_call_site"
MATCHED = "matched"
WITH_TRANSFER = "with_transfer"
WITH_BOUND = "with_bound"
WITH_EFFICIENCY = "with_efficiency"
EXCEEDED = "exceeded"
IN_GRAPH = "in_graph"
GRAPH_REPLAYS = "graph_replays"
CLOCKS = "clocks"
CLOCK_SPREAD_NS = "clock_spread_ns"


class TimeSource:
    """Values of ``time_source`` in MEASURED: how transfer and wait were obtained."""

    ALL_RANKS = "all_ranks"  # min duration over every member of the communicator
    SOME_RANKS = "some_ranks"  # min over 2+ members, not all (or the size is unknown): an upper
    # bound of the transfer, a lower bound of the wait
    ONE_MEMBER = "one_member"  # a communicator of one: the duration, no wait
    PROFILER = "profiler"  # the profiler's own per-op transit / wait (Ascend communication)

    ALL = (ALL_RANKS, SOME_RANKS, ONE_MEMBER, PROFILER)


class BoundStatus:
    """Values of ``bound_status`` in MEASURED: why a bound / efficiency is there or not."""

    OK = "ok"  # bound and efficiency known
    NO_PROFILE = "no_profile"  # no --hardware profile: no bound
    NO_GROUP_SIZE = "no_group_size"  # the communicator's size is unknown
    ONE_MEMBER = "one_member"  # a communicator of one moves nothing: no bound
    NO_SIZE = "no_size"  # the message bytes are unknown
    NO_MODEL = "no_model"  # no alpha-beta formula for this op (barrier, fused, other)
    NO_TRANSFER = "no_transfer"  # bound known, transfer not separable from wait: no efficiency
    EXCEEDED = "exceeded"  # bound / transfer above 1 + the profile's tolerance: an input is
    # wrong; bound and efficiency withheld, a measure.bound-exceeded finding says which

    ALL = (OK, NO_PROFILE, NO_GROUP_SIZE, ONE_MEMBER, NO_SIZE, NO_MODEL, NO_TRANSFER, EXCEEDED)


class Scope:
    """Values of ``scope`` in COVERAGE."""

    RUN = "run"
    COMMUNICATOR = "communicator"


class Clocks:
    """Values of ``clocks`` in COVERAGE (run row)."""

    SINGLE_RANK = "single rank"  # nothing to align
    ONE_HOST = "one host"  # every rank on one host: one clock
    ALIGNED = "aligned"  # collective ends agree across ranks within CLOCK_TOLERANCE_NS
    NOT_ALIGNED = "not aligned"  # they do not: skew and straggler figures are not meaningful
    UNKNOWN = "unknown"  # several hosts and no collective matched across ranks


# One row for the run (scope 'run') and one per communicator (scope 'communicator'; the
# collectives whose communicator nothing identifies share one row with a null key). Counts
# are collective instances on ranks (MEASURED rows).
COVERAGE = pa.schema(
    [
        _f(SCOPE, _DICT, "'run' or 'communicator' (schema.Scope)", nullable=False),
        _f(GROUP, _DICT, "communicator role (most frequent group label of its collectives)"),
        _f(PG_NAME, _DICT, "process group / HCCL communicator name when the trace gives it"),
        _f(PG_DESC, _DICT, "process group description when the trace gives it"),
        _f(MEMBERS, _I32_LIST, "global ranks of the communicator, when known"),
        _f(GROUP_SIZE, pa.int32(), "the communicator's real size (run row: the world size); "
           "null when nothing says", "ranks"),
        _f(SIZE_SOURCE, _DICT, "where the size came from: group_size (trace args / Ascend "
           "communication matrix), pg_ranks, process_groups (pg_config), topology, world_size"),
        _f(RANKS_PRESENT, pa.int32(), "members whose traces are in the run", "ranks"),
        _f(RANKS_ABSENT, pa.int32(), "members whose traces are absent (size - present); null "
           "when the size is unknown", "ranks"),
        _f(MISSING_RANKS, _I32_LIST, "the absent members, when the members are known"),
        _f(COUNT, pa.int64(), "collective instances on ranks"),
        _f(WITH_BYTES, pa.int64(), "of which the trace gives the bytes"),
        _f(WITH_COMM_META, pa.int64(), "of which the trace names the communicator (process "
           "group name / description / ranks / size, or a comms id)"),
        _f(WITH_CALL_SITE, pa.int64(), "of which the Python call site is known"),
        _f(MATCHED, pa.int64(), "of which another member's instance was found"),
        _f(WITH_TRANSFER, pa.int64(), "of which transfer is separated from wait"),
        _f(WITH_BOUND, pa.int64(), "of which the alpha-beta bound is known"),
        _f(WITH_EFFICIENCY, pa.int64(), "of which the efficiency is known (bound and transfer)"),
        _f(EXCEEDED, pa.int64(), "of which bound / transfer exceeded 1 + tolerance (withheld)"),
        _f(IN_GRAPH, pa.int64(), "of which ran inside a CUDA-graph replay"),
        _f(EFFICIENCY, pa.float64(), "sum of bounds / sum of transfers over the collectives "
           "with an efficiency", "ratio"),
        _f(GRAPH_REPLAYS, pa.int64(), "CUDA-graph launches seen (run row only)"),
        _f(CLOCKS, _DICT, "run row: whether rank clocks agree (schema.Clocks)"),
        _f(CLOCK_SPREAD_NS, pa.int64(), "run row: median over matched instances of the spread "
           "of their end times across ranks", "ns"),
    ],
    metadata={"table": "COVERAGE", "schema_version": SCHEMA_VERSION},
)

TABLES.update({"COVERAGE": COVERAGE})

# --- end coverage ---


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _same_type(actual: pa.DataType, expected: pa.DataType) -> bool:
    if actual.equals(expected):
        return True
    # A dictionary column may also arrive decoded (plain string) from a reader; a plain string
    # is accepted where a dictionary of strings is declared, and vice versa.
    def base(t: pa.DataType) -> pa.DataType:
        if pa.types.is_dictionary(t):
            return t.value_type
        if pa.types.is_large_string(t):
            return pa.string()
        return t

    return base(actual).equals(base(expected))


def validate(table: pa.Table, schema: pa.Schema = EVENTS, *, name: str | None = None) -> None:
    """Raise SchemaError when a column of ``schema`` is missing or has another type."""
    label = name or (schema.metadata or {}).get(b"table", b"table").decode()
    missing = [f.name for f in schema if f.name not in table.column_names]
    if missing:
        raise SchemaError(f"{label}: missing column(s) {', '.join(missing)}")
    for f in schema:
        actual = table.schema.field(f.name).type
        if not _same_type(actual, f.type):
            raise SchemaError(f"{label}: column {f.name} is {actual}, expected {f.type}")
        if not f.nullable and table.column(f.name).null_count:
            raise SchemaError(f"{label}: column {f.name} has nulls")


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Select and cast the columns of ``schema`` in order; absent columns become nulls."""
    n = table.num_rows
    index = {name: i for i, name in enumerate(table.column_names)}  # once, not per field
    cols = []
    for f in schema:
        if f.name in index:
            col = table.column(index[f.name])
            if not col.type.equals(f.type):
                col = col.cast(f.type)
        else:
            col = pa.nulls(n, f.type)
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=schema)


def empty(schema: pa.Schema) -> pa.Table:
    return schema.empty_table()


def columns_doc(schema: pa.Schema) -> Iterable[tuple[str, str, str, str]]:
    """(name, type, unit, doc) for every field: used by the docs and `tracekit schema`."""
    for f in schema:
        md = f.metadata or {}
        yield (
            f.name,
            str(f.type),
            md.get(b"unit", b"").decode(),
            md.get(b"doc", b"").decode(),
        )


def names(schema: pa.Schema) -> Sequence[str]:
    return [f.name for f in schema]
