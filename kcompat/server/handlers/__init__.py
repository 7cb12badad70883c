"""One module per API family; each registers its handlers and advertised versions in registry.HANDLERS.

A broker imports a module on the first request of one of its APIs (registry.registration), through
kcompat/server/handler_index.py: adding an API family is adding a module here and running
tools/gen_handler_index.py.
"""
