"""Slurm integration: drain and resume through scontrol, and the prolog, epilog and
HealthCheckProgram hooks (contrib/slurm/ holds the scripts Slurm runs)."""
