"""One module per API family; each registers its handlers and advertised versions in registry.HANDLERS.

Broker imports every module of this package at start-up (dispatcher.load_handlers), so adding an API
family is adding a module here: the group coordinator's handlers go in `groups.py`.
"""
