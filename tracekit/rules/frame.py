"""Names of the engine's working columns (internal pandas frame, never written out).

The frame holds the communication rows of EVENTS plus what the stages decide about them;
table columns keep their ``tracekit.schema`` names, these are the engine's own scratch.
"""

from __future__ import annotations

ROW = "_row"  # position of the row in the EVENTS table
KRULE = "_krule"  # index into RuleSet.kernel_classes (-1: none)
LIBRARY = "_library"
ROLE = "_role"
MODE = "_mode"
INSTANCE = "_instance"  # bool
GLOO = "_gloo"  # the kernel rule's library is gloo
RUNS_AS = "_runs_as"
LINK = "_link"  # ROW of the instance a wrapper caused (gloo runloop), or -1
THREAD_GROUP = "_thread_group"  # communicator the row's runloop thread is known to serve
LOGICAL_OP = "_logical_op"  # op of the logical collective (reduce x N -> reduce_scatterv)
STEP = "_step"
SEQ_IN_STEP = "_seq"
CANDIDATES = "_candidates"  # tuple of candidate groups
GROUP_RULE = "_group_rule"
GROUP_REASON = "_group_reason"
CALL_PATH = "_call_path"
PATH_RULE = "_path_rule"
PATH_REASON = "_path_reason"
ORDER_TS = "_order_ts"  # time used to order collectives (the wrapper's start when linked)
THREAD_KEY = "_thread_key"
RANKS_KEY = "_ranks_key"
CALL_GROUP = "_call_group"
CALL_RULE = "_call_rule"
KGROUP = "_kgroup"
HAS_SPLIT = "_has_split"
MATCH_KEY = "_match_key"
MATCH_K = "_match_k"
UNIT = "_unit"  # the row stands for its collective in the rank's order (wrapper or instance)
START = "_start"
TOKEN = "_token"
KPATH = "_kpath"
RULE_OP = "_rule_op"
SLOTS = "_slots"
MEMBERS_KEY = "_members"
RANKS_CODE = "_ranks_code"  # PG_RANKS coded once per distinct list (keys.list_codes)
K_IN_GROUP = "_k"
END = "_end"
SRC = "_src"
IDX = "_idx"
CALL_KEY = "_call_key"
PREVIOUS = "_previous"
LAYER_NO = "_layer_no"
SPAN_NO = "_span_no"
LAUNCH = "_launch"  # EVENTS position of a kernel's launch (launcher.launch_rows)
