"""The web console on the admin listener: server-rendered pages (pages.py), what they show
(views.py), the message browser (browse.py) and the groups' lag history (lag_history.py)."""
