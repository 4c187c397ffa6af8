from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "controlplane.chat"
    label = "chat"
