"""What runs on one node: the process runner, the node bundle and a pure parser per tool output.

Imports nothing from ``topology`` or ``orchestrator`` (data flows probes -> topology -> orchestrator).
"""
