import os

# Tests run with a throwaway key; a deployment must set SECRET_KEY. (scripts/test sets this too,
# since pytest-django may read the settings before this file is imported.)
os.environ.setdefault("EVALDASH_INSECURE_DEV_KEY", "1")
os.environ.setdefault("EVALDASH_PLAIN_STATIC", "1")  # static files from their sources
