from tests.runbook.config_alone import table

print(table())
