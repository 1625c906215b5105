"""The dashboard's pages, one module a part of the site (dashboard/site.py routes them): the
roster and the agents, the owner's settings, what the owner keeps and spends, and the rooms.

Server-rendered; every write goes through the JSON API from the page's script, so the rules,
the CSRF pair and the error shape are the API's. Another owner's rows are a 404.
"""
