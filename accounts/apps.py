from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """People's accounts: the site's sign-in and their named, hashed API tokens."""

    name = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from accounts.api import schemes  # noqa: F401  (registers the OpenAPI security schemes)
