import sys

from tests.runbook.config_alone import table

if "--loso" in sys.argv[1:]:
    from tests.runbook.config_alone import loso

    print(loso.report())
    if "--fit" in sys.argv[1:]:
        print()
        print(loso.table_literal(loso.fit(loso.measured())))
else:
    print(table())
