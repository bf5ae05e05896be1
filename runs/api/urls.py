"""Routes of the runs API, included under ``api/`` by deuz_project.urls."""

from django.urls import path

from runs.api import chat_views, effect_views, thread_views, views

urlpatterns = [
    path("agents/", views.AgentListApi.as_view(), name="api-agents"),
    path("runs/", views.RunCollectionApi.as_view(), name="api-runs"),
    path("runs/<str:run_id>/", views.RunDetailApi.as_view(), name="api-run-detail"),
    path("runs/<str:run_id>/checkpoints/", views.RunCheckpointListApi.as_view(), name="api-run-checkpoints"),
    path("runs/<str:run_id>/checkpoints/<str:step_index>/fork/", views.RunForkApi.as_view(), name="api-run-fork"),
    path(
        "runs/<str:run_id>/approvals/<str:approval_id>/",
        views.ApprovalDecideApi.as_view(),
        name="api-approval-decide",
    ),
    path("runs/<str:run_id>/cancel/", views.RunCancelApi.as_view(), name="api-run-cancel"),
    path("runs/<str:run_id>/effects/<str:operation_id>/resolve/", effect_views.EffectResolveApi.as_view(),
         name="api-effect-resolve"),
    path("threads/", thread_views.ThreadCollectionApi.as_view(), name="api-threads"),
    path("threads/<str:thread_id>/", thread_views.ThreadDetailApi.as_view(), name="api-thread-detail"),
    path("threads/<str:thread_id>/messages/", thread_views.ThreadMessageAddApi.as_view(),
         name="api-thread-messages"),
    path("chat/", chat_views.ChatSendApi.as_view(), name="api-chat"),
    path("chat/<str:chat_id>/stream/", chat_views.ChatStreamApi.as_view(), name="api-chat-stream"),
    path("chat/<str:chat_id>/messages/", chat_views.ChatMessageListApi.as_view(), name="api-chat-messages"),
    path("metrics/", effect_views.MetricsApi.as_view(), name="api-metrics"),
    path("effects/stop/", effect_views.EffectStopApi.as_view(), name="api-effects-stop"),
]
