"""Routes of the chat pages, mounted at /chat/."""

from django.urls import path

from runs.pages import chat

urlpatterns = [
    path("", chat.chat_list, name="chat-list"),
    path("<str:thread_id>/", chat.chat_detail, name="chat-detail"),
    path("<str:thread_id>/turns/<str:run_id>/approvals/<str:approval_id>/", chat.chat_decide, name="chat-decide"),
]
