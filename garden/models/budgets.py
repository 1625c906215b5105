from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models


class TokenBudget(models.Model):
    """One owner's token budgets on each of the operator's credentials, where the operator
    sets them apart from the site's (GARDEN_TOKEN_BUDGET_PER_MINUTE / _PER_DAY): empty keeps
    the site's, 0 is unlimited. Edited by staff in the admin; enforced in garden/budgets.py."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="token_budget"
    )
    per_minute = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="Tokens a minute on each operator credential; empty: the site's; 0: unlimited.",
    )
    per_day = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="Tokens a day (UTC) on each operator credential; empty: the site's; 0: "
        "unlimited.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"Token budget of {self.owner}"
