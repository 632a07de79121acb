#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The switch history beside the switches (issue 44, item 10): an agent's request that ends
without a switch (denied with `piworkfs mode --deny`, expired, superseded) is recorded with
who asked and why, and who ended it and how; a plan's approval and reopening are recorded as
such, not as a switch "plan -> plan". `piworkfs log --switches` and `--json` show them.

(The denials typed at run's consent bar are tests/run/test_pty.py's, which holds a terminal.)

Fixture: the standard tree (tests/lib/harness.py) and an empty plans folder.
"""

import json
import os
import re
import sqlite3
import unittest

import harness  # noqa: E402

PLAN = """---
title: Cache the parsed config
status: draft
---
# Cache the parsed config

## Tasks
- [ ] Add the cache
"""

DEADLINE = 60.0


def comm_of(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


class SwitchHistory(harness.MountCase):
    tree = dict(harness.STANDARD_TREE, **{"docs/plans/.keep": ""})

    def switches(self):
        """The switch history of the project, as `log --switches --json` prints it."""
        p = self.run_pw("log", "--switches", "--json", "-C", self.project, check=True)
        return [json.loads(l) for l in p.stdout.splitlines() if l.strip()]

    def table(self):
        """The table off a terminal, each row's rule (on the lines under it) joined to it."""
        text = self.run_pw("log", "--switches", "-C", self.project, check=True).stdout
        return re.sub(r"\n +", " ", text)

    def agent(self, v):
        """A connection to a fresh agent socket of V (closed at cleanup)."""
        c = harness.RpcClient(self.socket_path(v))
        self.addCleanup(c.close)
        a = harness.RpcClient(c.call("agent.open")["socket"])
        self.addCleanup(a.close)
        return a

    def wait_outcome(self, agent, rid):
        return agent.call("mode.request.wait", {"id": rid, "wait_ms": int(DEADLINE * 1000)})

    def test_requests_that_end_without_a_switch_are_in_the_history(self):
        v = self.mount("plan")
        agent = self.agent(v)
        me = os.getpid()

        # Denied from another terminal of the person.
        r = agent.call("mode.request", {"mode": "build", "reason": "implement step 1"})
        self.assertEqual(r["outcome"], "pending")
        self.run_pw("mode", "--mount", v.mp, "--deny", check=True)
        self.assertEqual(self.wait_outcome(agent, r["id"])["outcome"], "denied")
        # Expired: nobody answered.
        r = agent.call("mode.request", {"mode": "design", "reason": "draw", "expires_s": 1})
        self.assertEqual(self.wait_outcome(agent, r["id"])["outcome"], "expired")
        # Superseded by a newer one, which the person then allows.
        first = agent.call("mode.request", {"mode": "build", "reason": "first"})
        second = agent.call("mode.request", {"mode": "build", "reason": "second"})
        self.assertEqual(self.wait_outcome(agent, first["id"])["outcome"], "superseded")
        self.run_pw("mode", "--mount", v.mp, "--approve", str(second["id"]), check=True)

        rows = self.switches()
        ended = [r for r in rows if r["outcome"] in ("denied", "expired", "superseded")]
        self.assertEqual([(r["outcome"], r["from"], r["to"], r["reason"]) for r in ended],
                         [("denied", "plan", "build", "implement step 1"),
                          ("expired", "plan", "design", "draw"),
                          ("superseded", "plan", "build", "first")], rows)
        for r in ended:
            self.assertEqual(r["kind"], "switch")
            self.assertEqual(r["asked_by"], {"pid": me, "comm": comm_of(me)}, r)
        denied, expired, superseded = ended
        self.assertIn("piworkfs mode --deny", denied["answered_by"])
        self.assertEqual(expired["how"], "no answer within 1 s")
        self.assertIsNone(expired.get("answered_by"))
        self.assertEqual(superseded["how"], "replaced by a newer request (%d)" % second["id"])
        # The granted one is the switch itself, now with who asked too.
        granted = [r for r in rows if r["origin"] == "request" and r["outcome"] == "switched"]
        self.assertEqual(len(granted), 1, rows)
        self.assertEqual(granted[0]["asked_by"]["pid"], me)
        self.assertEqual(granted[0]["reason"], "second")

        # The table says the same in words.
        text = self.table()
        self.assertRegex(text, r'switch +denied .*plan -> build +the agent \(%s, pid %d\) '
                         r'asked \("implement step 1"\); denied by piworkfs mode --deny'
                         % (comm_of(me), me))
        self.assertIn('expired: no answer within 1 s', text)
        self.assertIn('superseded: replaced by a newer request', text)
        # --mode: a request that ended happened in the mode that stayed.
        p = self.run_pw("log", "--switches", "--mode", "plan", "-C", self.project, check=True)
        self.assertIn("implement step 1", p.stdout)
        p = self.run_pw("log", "--switches", "--mode", "build", "-C", self.project,
                        check=True)
        self.assertNotIn("denied", p.stdout)
        self.assertIn('"second"', p.stdout)

    def test_a_plans_approval_and_reopening_are_logged_as_such(self):
        v = self.mount("plan")
        with open(v.path("docs/plans/cache.md"), "w") as f:
            f.write(PLAN)
        self.run_pw("plan", "--mount", v.mp, "approve", "cache", check=True)
        self.run_pw("plan", "--mount", v.mp, "reopen", "cache", check=True)
        # The agent asks for another approval; the person denies it, then allows a third.
        for name in ("other", "third"):
            with open(v.path("docs/plans/%s.md" % name), "w") as f:
                f.write(PLAN)
        agent = self.agent(v)
        r = agent.call("plan.request_approval", {"name": "other", "reason": "ready"})
        self.run_pw("mode", "--mount", v.mp, "--deny", check=True)
        self.assertEqual(self.wait_outcome(agent, r["id"])["outcome"], "denied")
        r = agent.call("plan.request_approval", {"name": "third", "reason": "done now"})
        self.run_pw("mode", "--mount", v.mp, "--approve", str(r["id"]), check=True)
        self.assertEqual(self.wait_outcome(agent, r["id"])["outcome"], "approved")

        rows = self.switches()
        self.assertFalse([r for r in rows if r["outcome"] == "switched"
                          and r["from"] == r["to"] == "plan"],
                         "a decision on a plan is no switch plan -> plan: %s" % rows)
        plans = [(r["outcome"], r.get("plan"), r["origin"]) for r in rows if r.get("plan")]
        self.assertEqual(plans, [("approved", "cache", "plan-approve"),
                                 ("reopened", "cache", "plan-reopen"),
                                 ("denied", "other", "request"),
                                 ("approved", "third", "request")], rows)
        granted = rows[-1]
        self.assertEqual((granted["reason"], granted["asked_by"]["pid"]),
                         ("done now", os.getpid()))
        self.assertIn("piworkfs mode --approve", granted["answered_by"])
        text = self.table()
        self.assertNotIn("plan -> plan", text)
        self.assertRegex(text, r"approve +- .*plan cache +approved by piworkfs \(pid \d+")
        self.assertRegex(text, r"reopen +- .*plan cache +reopened by piworkfs \(pid \d+")
        self.assertRegex(text, r'approve +denied .*plan other +the agent \(.*\) asked '
                         r'\("ready"\); denied by piworkfs mode --deny')
        self.assertRegex(text, r'approve +- .*plan third +the agent \(.*\) asked '
                         r'\("done now"\); allowed by piworkfs mode --approve')

    def test_a_database_of_the_schema_before_is_migrated_and_keeps_its_history(self):
        # A state database as the release before wrote it: schema 7, one switch recorded.
        v = self.mount("plan")
        self.set_mode(v, "build")
        self.unmount(v)
        db = sqlite3.connect(self.state_db)
        cols = ("outcome", "plan", "asked_pid", "asked_comm", "how")
        for c in cols:
            db.execute("ALTER TABLE switches DROP COLUMN %s" % c)
        db.execute("PRAGMA user_version = 7")
        db.commit()
        db.close()
        # Read-only, before any daemon migrated it: the history reads as it was.
        old = self.switches()
        self.assertEqual([(r["from"], r["to"], r["outcome"]) for r in old],
                         [(None, "plan", "switched"), ("plan", "build", "switched")])
        # The next mount migrates it; the old rows stay, a denial is recorded.
        v = self.mount("plan", mountpoint=self.mp)
        agent = self.agent(v)
        r = agent.call("mode.request", {"mode": "build", "reason": "again"})
        self.run_pw("mode", "--mount", v.mp, "--deny", check=True)
        self.assertEqual(self.wait_outcome(agent, r["id"])["outcome"], "denied")
        db = sqlite3.connect(self.state_db)
        self.assertEqual(db.execute("PRAGMA user_version").fetchone()[0], 8)
        have = {row[1] for row in db.execute("PRAGMA table_info(switches)")}
        db.close()
        self.assertTrue(set(cols) <= have, have)
        rows = self.switches()
        self.assertEqual([(r["from"], r["to"], r["outcome"]) for r in rows],
                         [(None, "plan", "switched"), ("plan", "build", "switched"),
                          (None, "plan", "switched"), ("plan", "build", "denied")], rows)


if __name__ == "__main__":
    unittest.main()
