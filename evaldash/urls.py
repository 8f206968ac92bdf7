from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from records.views.login import ThrottledLoginView, refused_login, throttled

urlpatterns = [
    # The admin site's login takes passwords too: the same lockout as the site's own.
    path("admin/login/", throttled(admin.site.login, refused_login)),
    path("admin/", admin.site.urls),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("records.urls")),
]
