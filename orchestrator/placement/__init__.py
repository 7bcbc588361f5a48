"""Placement advice: which healthy nodes and GPUs a job should get, with NIC and NUMA binding."""
