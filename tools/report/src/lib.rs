//! sacct-based reports on DL jobs: tables, CSV/JSON and plots
