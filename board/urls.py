from django.urls import path

from board import views

urlpatterns = [
    path("", views.home, name="board-home"),
]
