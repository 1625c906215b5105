"""No tables of its own: operator messages live in files. A proxy of Run gives the admin a home."""

from garden.models import Run


class OperatorMessageRun(Run):
    """A run seen through its operator-message records, for the read-only admin."""

    class Meta:
        proxy = True
        verbose_name = "operator message run"
        verbose_name_plural = "operator message runs"
