"""Postmortem of a failed job: job logs, kernel logs and probe history on one timeline, ranked causes."""
