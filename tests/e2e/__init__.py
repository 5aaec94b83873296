"""End-to-end runs of the four real agent clients against a scripted fake model (issue 9).

fake_model.py: the model server; wire.py: its three streaming formats; clients.py: one runner
per client; scenario.py: the example machine's session as the fake model plays it.
"""
