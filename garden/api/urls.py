from django.urls import path

from . import artifacts, mcp, views, workspaces

urlpatterns = [
    path("model-accounts", views.ModelAccountListCreateApi.as_view(), name="model-accounts"),
    path(
        "model-accounts/<int:account_id>",
        views.ModelAccountDetailApi.as_view(),
        name="model-account",
    ),
    path(
        "model-accounts/<int:account_id>/test",
        views.ModelAccountTestApi.as_view(),
        name="model-account-test",
    ),
    path("credentials", views.CredentialListApi.as_view(), name="credentials"),
    path("tokens", views.AccessTokenListCreateApi.as_view(), name="tokens"),
    path("tokens/<int:token_id>", views.AccessTokenDetailApi.as_view(), name="token"),
    path("agents", views.AgentListCreateApi.as_view(), name="agents"),
    path("agents/<int:agent_id>", views.AgentDetailApi.as_view(), name="agent"),
    path("conversations", views.ConversationListCreateApi.as_view(), name="conversations"),
    path(
        "conversations/<int:conversation_id>",
        views.ConversationDetailApi.as_view(),
        name="conversation",
    ),
    path("mcp-servers", mcp.McpServerListCreateApi.as_view(), name="mcp-servers"),
    path("mcp-servers/<int:server_id>", mcp.McpServerDetailApi.as_view(), name="mcp-server"),
    path(
        "mcp-servers/<int:server_id>/refresh",
        mcp.McpServerRefreshApi.as_view(),
        name="mcp-server-refresh",
    ),
    path("workspaces", workspaces.WorkspaceListCreateApi.as_view(), name="workspaces"),
    path(
        "workspaces/<int:workspace_id>/members",
        workspaces.WorkspaceMemberListCreateApi.as_view(),
        name="workspace-members",
    ),
    path(
        "workspaces/<int:workspace_id>/members/<int:user_id>",
        workspaces.WorkspaceMemberDetailApi.as_view(),
        name="workspace-member",
    ),
    path(
        "workspaces/<int:workspace_id>/invitations",
        workspaces.WorkspaceInvitationListCreateApi.as_view(),
        name="workspace-invitations",
    ),
    path(
        "workspaces/<int:workspace_id>/invitations/<int:invitation_id>",
        workspaces.WorkspaceInvitationDetailApi.as_view(),
        name="workspace-invitation",
    ),
    path("invitations/accept", workspaces.InvitationAcceptApi.as_view(), name="invitation-accept"),
    path("artifacts", artifacts.ArtifactListApi.as_view(), name="artifacts"),
    path("artifacts/<int:artifact_id>", artifacts.ArtifactDetailApi.as_view(), name="artifact"),
]
