"""Fault injection: kill -9, concurrency, signals, bad input, full and read-only disks."""
