"""Replay (SPEC §12): stored authorize decisions re-evaluated under a candidate policy."""
