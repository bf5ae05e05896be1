from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    """Webhook subscriptions, reviewers' emails, and the outbox that tells them of runs, approvals and effects."""

    name = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from notifications import checks  # noqa: F401  (registers the system checks)
        from notifications.delivery.drain import outbox_wake_local
        from notifications.publishing.receivers import publishing_connect
        from notifications.signals import outbox_messages_queued

        publishing_connect()
        outbox_messages_queued.connect(outbox_wake_local, dispatch_uid="notifications.wake_deliverers")
