//! Trace-driven discrete-event simulator of a heterogeneous GPU cluster, on the cellsched core
