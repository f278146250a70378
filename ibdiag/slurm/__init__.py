"""Slurm integration: drain and resume through scontrol, and the prolog, epilog and
HealthCheckProgram hooks (contrib/slurm/ holds the scripts Slurm runs)."""

# Defaults shared by the hooks and the command line (kept here: importing this package is free).
DEFAULT_STATE_DIR = "/run/ibdiag"
DEFAULT_SCONTROL_TIMEOUT_S = 5.0
