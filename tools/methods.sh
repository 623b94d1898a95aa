# kvplan's methods, for the tools' scripts that run or show every one of them (sourced by
# tools/protocol_v3.sh and tools/leaderboard_render.sh): every name of the method table
# (`method_table!`, planner/src/method.rs), each once — planner/tests/docs.rs checks this line.
# The order is the runs' and the boards' rows' (FullKV, the SnapKV family, the rest), kept as the
# committed results were made.
KVPLAN_METHODS="full,snapkv,pyramid,headkv,headkv-r,spindle,pod,treekv,streaming,h2o,tova,knorm"
