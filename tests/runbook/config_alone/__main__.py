import sys

from tests.runbook.config_alone import table

if "--write" in sys.argv[1:]:
    from tests.runbook.config_alone import regenerate

    changed = regenerate.write()
    print("rewrote: " + ", ".join(changed) if changed else "everything derived from the corpus is current")
elif "--loso" in sys.argv[1:]:
    from tests.runbook.config_alone import loso

    print(loso.report())
    if "--fit" in sys.argv[1:]:
        print()
        print(loso.table_literal(loso.fit(loso.measured())))
else:
    print(table())
