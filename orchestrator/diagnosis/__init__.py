"""Diagnosis: rules over parsed node facts produce findings; the engine runs them and sets verdicts."""
