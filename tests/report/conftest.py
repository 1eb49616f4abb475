"""The report tests' shared fixture (defined in report_support, with the helpers they import)."""

from report_support import report_workspace  # noqa: F401
