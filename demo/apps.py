from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The built-in demo agents (reimbursement, coder), the sandboxes they act on, and the demo users of
    `manage.py serve` in DEBUG. The product apps hold nothing of the demo."""

    name = "demo"
    verbose_name = "Demo sandboxes"
