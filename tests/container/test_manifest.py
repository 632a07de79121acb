# SPDX-License-Identifier: MIT
"""integrations/kubernetes/pod.yaml is a valid Kubernetes Pod, checked offline against the
official schema by integrations/kubernetes/check-manifest (kubernetes-models, pinned in its
package-lock.json, installed by scripts/setup), unknown fields refused as the API server's
strict validation refuses them; and the check fails on what a cluster would refuse, so its
pass means something. Python 3 stdlib only; needs node and the installed package (a missing
one fails, naming scripts/setup).
"""

import os
import subprocess
import tempfile
import unittest

from harness import SOURCE  # tests/lib, on PYTHONPATH

KUBE = os.path.join(SOURCE, "integrations", "kubernetes")
CHECK = os.path.join(KUBE, "check-manifest")
MANIFEST = os.path.join(KUBE, "pod.yaml")


class Manifest(unittest.TestCase):
    def check(self, path):
        p = subprocess.run([CHECK, path], capture_output=True, text=True, timeout=120)
        self.assertNotEqual(p.returncode, 2, p.stdout + p.stderr)
        return p.returncode, p.stdout

    def mutated(self, old, new):
        with open(MANIFEST) as f:
            text = f.read()
        self.assertIn(old, text)
        return text.replace(old, new, 1)

    def test_the_pod_manifest_is_valid(self):
        rc, out = self.check(MANIFEST)
        self.assertEqual((rc, out), (0, ""))

    def test_what_a_cluster_refuses_is_refused(self):
        cases = [
            # an unknown field (strict field validation)
            (("securityContext: { privileged: true }",
              "securityContext: { privileged: true, priviledged: true }"),
             r'spec\.containers\[0\]\.securityContext\.priviledged: unknown field'),
            # a value outside an enum
            (("mountPropagation: Bidirectional", "mountPropagation: Bidirectionnal"),
             r"mountPropagation must be equal to one of the allowed values"),
            # a wrong type
            (("terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds: soon"),
             r"terminationGracePeriodSeconds must be integer"),
            # a required field missing
            (("- { name: piworkfs-agent, mountPath: /agent }",
              "- { name: piworkfs-agent }"),
             r"volumeMounts\.2 must have required property '?mountPath"),
            # a key given twice
            (("  name: agent-1\n", "  name: agent-1\n  name: agent-2\n"),
             r"Map keys must be unique"),
        ]
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, ((old, new), _) in enumerate(cases):
                paths.append(os.path.join(d, "case%d.yaml" % i))
                with open(paths[-1], "w") as f:
                    f.write(self.mutated(old, new))
            # One run for all (node loads the schema once): one line per problem, by file.
            p = subprocess.run([CHECK, *paths], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        for path, ((_, new), want) in zip(paths, cases):
            with self.subTest(new=new):
                lines = [ln for ln in p.stdout.splitlines() if ln.startswith(path + ":")]
                self.assertTrue(lines, p.stdout)
                self.assertRegex("\n".join(lines), want)

if __name__ == "__main__":
    unittest.main(verbosity=2)
