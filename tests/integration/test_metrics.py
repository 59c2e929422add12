"""Prometheus metrics of a running hots3, checked by the real tools: promtool accepts the
exposition, and Debian's Prometheus scrapes the metrics address while a scripted workload runs,
its HTTP API seeing the counters move. The S3 port serves the same with a bearer token."""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import s3_support as s3  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

TOKEN = "metrics-bearer-token-0123456789"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def samples(text):
    """{(name, frozenset(labels)): value} of an exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        assert m, line
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


def dashboard_queries():
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "packaging", "grafana", "hots3-dashboard.json")) as f:
        dashboard = json.load(f)
    return [t["expr"] for p in dashboard["panels"] for t in p["targets"]]


class MetricsTest(s3.ServerTestCase):
    server_config = '[metrics]\nlisten = "127.0.0.1:0"\nbearer_token = "%s"\n' % TOKEN
    # (A relative path: the server runs in its working directory.)
    server_options = {"args": ("--metrics-port-file", "metrics.port")}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = cls.server.dir
        with open(os.path.join(cls.dir, "metrics.port")) as f:
            cls.metrics_port = int(f.read())
        cls.s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % cls.port,
                              aws_access_key_id=s3.ACCESS_KEY, aws_secret_access_key=s3.SECRET_KEY,
                              region_name=s3.REGION, config=Config(retries={"total_max_attempts": 1}))
        cls.s3.create_bucket(Bucket="metered")

    def scrape(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port, timeout=10) as r:
            self.assertTrue(r.headers["Content-Type"].startswith("text/plain; version=0.0.4"))
            return r.read().decode()

    def workload(self, n=5):
        for i in range(n):
            self.s3.put_object(Bucket="metered", Key="k%d" % i, Body=b"x" * 1000)
            self.s3.get_object(Bucket="metered", Key="k%d" % i)["Body"].read()
        with self.assertRaises(ClientError):
            self.s3.get_object(Bucket="metered", Key="missing")

    def test_requests_are_counted_by_operation_and_status_with_their_latency_and_bytes(self):
        before = samples(self.scrape())
        self.workload()
        # Past the size kept in the catalog: on the device, written and flushed before its 200.
        self.s3.put_object(Bucket="metered", Key="large", Body=os.urandom(100000))
        after = samples(self.scrape())

        def grew(name, by, **labels):
            key = (name, frozenset(labels.items()))
            self.assertGreaterEqual(after.get(key, 0) - before.get(key, 0), by, key)
        grew("hots3_s3_requests_total", 5, operation="PutObject", status="200")
        grew("hots3_s3_requests_total", 5, operation="GetObject", status="200")
        grew("hots3_s3_requests_total", 1, operation="GetObject", status="404")
        grew("hots3_s3_request_duration_seconds_count", 6, operation="GetObject")
        grew("hots3_s3_request_duration_seconds_bucket", 6, operation="GetObject", le="+Inf")
        grew("hots3_s3_request_body_bytes_total", 5000, operation="PutObject")
        grew("hots3_s3_response_body_bytes_total", 5000, operation="GetObject")
        # Each acknowledged write was a catalog batch and a WAL flush (or shared them); the large
        # object went to the device.
        grew("hots3_catalog_batch_seconds_count", 1)
        grew("hots3_catalog_sync_seconds_count", 1)
        grew("hots3_catalog_batch_writes_count", 1)
        grew("hots3_catalog_batch_writes_sum", 1)
        # Every write is in one batch (a batch ending as the scrape reads may count in one only).
        in_batches = after[("hots3_catalog_batch_writes_sum", frozenset())]
        writes = after[("hots3_catalog_writes_total", frozenset())]
        self.assertGreaterEqual(in_batches, writes)
        self.assertLessEqual(in_batches, writes + 512)
        self.assertLessEqual(after[("hots3_catalog_batch_seconds_count", frozenset())],
                             after[("hots3_catalog_writes_total", frozenset())])
        grew("hots3_device_io_seconds_count", 1, op="write")
        grew("hots3_device_io_seconds_count", 1, op="flush")
        grew("hots3_device_io_seconds_bucket", 1, op="write", le="+Inf")
        self.assertEqual(after[("hots3_device_io_in_flight", frozenset())], 0)  # nothing under way
        self.assertGreaterEqual(after[("hots3_device_free_extents", frozenset())], 1)
        self.assertLessEqual(after[("hots3_device_largest_free_bytes", frozenset())],
                             after[("hots3_device_free_bytes", frozenset())])
        self.assertGreater(after[("hots3_device_largest_free_bytes", frozenset())], 0)
        # The module gauges are there and plausible.
        self.assertGreaterEqual(after[("hots3_http_connections", frozenset())], 1)
        self.assertGreater(after[("hots3_device_bytes", frozenset())], 0)
        self.assertGreater(after[("hots3_device_free_bytes", frozenset())], 0)
        self.assertGreater(after[("hots3_catalog_commits_total", frozenset())], 0)
        info = [(dict(ls), v) for (n, ls), v in after.items() if n == "hots3_build_info"]
        self.assertEqual(len(info), 1)
        self.assertEqual(info[0][1], 1)
        self.assertRegex(info[0][0]["version"], r"^\d+\.\d+")

    def test_promtool_accepts_the_exposition(self):
        self.workload(1)
        text = self.scrape()
        run = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertEqual((run.stdout + run.stderr).strip(), "")  # not even a lint warning

    def test_labels_stay_bounded_whatever_clients_ask(self):
        # Keys, buckets and unknown operations never become label values.
        for i in range(30):
            with self.assertRaises(ClientError):
                self.s3.get_object(Bucket="metered", Key="nothing-%d" % i)
            self.signed("GET", "/metered/k0", query=[("x-bogus-%d" % i, "")])
        text = self.scrape()
        self.assertNotIn("nothing-", text)
        self.assertNotIn("x-bogus", text)
        operations = {dict(ls).get("operation") for (n, ls) in samples(text) if n == "hots3_s3_requests_total"}
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "src", "s3", "router.cc")) as f:
            routes = set(re.findall(r'"(\w+)"\}', f.read()))
        self.assertIn("GetObject", routes)
        self.assertLessEqual(operations, routes | {"GetMetrics", "none"})

    def test_the_s3_port_serves_metrics_to_the_bearer_of_the_token_only(self):
        def get(target, token):
            request = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, target))
            if token:
                request.add_header("Authorization", "Bearer " + token)
            try:
                with urllib.request.urlopen(request, timeout=10) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, e.read().decode()
        status, body = get("/metrics", TOKEN)
        self.assertEqual(status, 200)
        self.assertIn("hots3_s3_requests_total", body)
        # The scrape before is counted under its own name, once its response is sent: a scrape on
        # another connection (another worker) can come first.
        deadline = time.monotonic() + 10
        while True:
            status, body = get("/metrics", TOKEN)
            if 'hots3_s3_requests_total{operation="GetMetrics",status="200"}' in body or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertIn('hots3_s3_requests_total{operation="GetMetrics",status="200"}', body)
        for target, token in (("/metrics", TOKEN[:-1] + "x"), ("/metrics", None), ("/metered/k0", TOKEN)):
            status, body = get(target, token)
            self.assertEqual(status, 403, (target, token))
            self.assertNotIn("hots3_s3_requests_total", body)
        # The metrics address serves /metrics and nothing else.
        with self.assertRaises(urllib.error.HTTPError) as other:
            urllib.request.urlopen("http://127.0.0.1:%d/metered/k0" % self.metrics_port, timeout=10)
        self.assertEqual(other.exception.code, 404)

    def test_prometheus_scrapes_it_and_sees_the_counters_move(self):
        port = free_port()
        directory = tempfile.mkdtemp(prefix="prometheus-", dir=self.dir)
        config = os.path.join(directory, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: hots3\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % self.metrics_port)
        with open(os.path.join(directory, "log"), "w") as log:
            prometheus = subprocess.Popen(
                ["prometheus", "--config.file=" + config, "--storage.tsdb.path=" + os.path.join(directory, "data"),
                 "--web.listen-address=127.0.0.1:%d" % port], stdout=log, stderr=subprocess.STDOUT)
        try:
            def query(expression):
                url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": expression}))
                try:
                    with urllib.request.urlopen(url, timeout=5) as r:
                        result = json.load(r)["data"]["result"]
                except (urllib.error.URLError, ConnectionError):
                    return None
                return float(result[0]["value"][1]) if result else None

            expression = 'sum(hots3_s3_requests_total{operation="PutObject"})'
            deadline = time.monotonic() + 60
            first = None
            while first is None:
                self.assertLess(time.monotonic(), deadline, "Prometheus never scraped hots3")
                self.assertIsNone(prometheus.poll(), "Prometheus exited")
                self.workload(1)
                first = query(expression)
                time.sleep(0.5)
            self.assertEqual(query('up{job="hots3"}'), 1)
            self.workload(10)
            while (query(expression) or 0) < first + 10:
                self.assertLess(time.monotonic(), deadline, "Prometheus did not see the PUTs")
                time.sleep(0.5)
            # A rate, as a dashboard shows it; and every query of the shipped dashboard runs.
            self.assertIsNotNone(query('sum(rate(hots3_s3_requests_total[10s]))'))
            for expression in dashboard_queries():
                url = "http://127.0.0.1:%d/api/v1/query?%s" % (
                    port, urllib.parse.urlencode({"query": expression.replace("$__rate_interval", "1m")}))
                with urllib.request.urlopen(url, timeout=5) as r:
                    self.assertEqual(json.load(r)["status"], "success", expression)
        finally:
            prometheus.terminate()
            prometheus.wait(timeout=30)


class AlertRulesTest(unittest.TestCase):
    RULES = os.path.join(os.path.dirname(__file__), "..", "..", "packaging", "prometheus")

    def test_the_alert_rules_load_and_fire_on_the_series_that_should_raise_them(self):
        for args in (["check", "rules", "hots3-rules.yml"], ["test", "rules", "hots3-rules.test.yml"]):
            run = subprocess.run(["promtool", *args], cwd=self.RULES, capture_output=True, text=True, timeout=60)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            self.assertIn("SUCCESS", run.stdout)

    def test_the_rules_and_the_dashboard_use_only_metrics_hots3_serves(self):
        with open(os.path.join(self.RULES, "hots3-rules.yml")) as f:
            used = set(re.findall(r"\b(hots3_\w+)", f.read()))
        used |= {re.sub(r"_(bucket|sum|count)$", "", name)
                 for expression in dashboard_queries() for name in re.findall(r"\b(hots3_\w+)", expression)}
        source = ""
        for path in ("src/app/metrics_endpoint.cc", "src/tier/uploader.cc", "src/s3/request_metrics.cc"):
            with open(os.path.join(os.path.dirname(__file__), "..", "..", path)) as f:
                source += f.read()
        self.assertTrue(used)
        self.assertEqual({name for name in used if '"%s"' % name not in source}, set())


class TieredMetricsTest(unittest.TestCase):
    """The tier's families, with a bucket bound write-back to a second hots3."""

    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.dirname(__file__))
        import test_tier_writeback as tier  # noqa: E402 (its test classes stay out of this module)
        cls.tier = tier
        tier.start_upstream(cls)
        # A requests_per_s the tests' bursts exceed: the limiter's waits show.
        config = tier.tier_config("http://127.0.0.1:%d" % cls.upstream.port, cls.credentials,
                                  upstream="requests_per_s = 20")
        tier.start_local(cls, config + '[metrics]\nbearer_token = "%s"\n' % TOKEN, "1GiB")

    @classmethod
    def tearDownClass(cls):
        cls.tier.stop_servers(cls)

    def scrape(self):
        request = urllib.request.Request("http://127.0.0.1:%d/metrics" % self.local.port,
                                         headers={"Authorization": "Bearer " + TOKEN})
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.read().decode()

    def test_the_tier_reports_its_upstream_queue_data_and_reads(self):
        for i in range(3):
            self.s3.put_object(Bucket="ckpt", Key="m/%d" % i, Body=os.urandom(4096))
        self.s3.get_object(Bucket="ckpt", Key="m/0")["Body"].read()
        deadline = time.monotonic() + 30
        while True:
            got = samples(self.scrape())

            def value(name, **labels):
                return got.get((name, frozenset(labels.items())))
            done = (value("hots3_tier_uploaded_objects_total") or 0) >= 3 and \
                value("hots3_tier_upstream_state", upstream="golden", state="ok") == 1 and \
                value("hots3_tier_queued_jobs", bucket="ckpt", action="upload") == 0 and \
                (value("hots3_tier_reads_total", bucket="ckpt", result="hit") or 0) >= 1
            if done:
                break
            self.assertLess(time.monotonic(), deadline, "the tier's metrics never showed the uploads")
            time.sleep(0.2)
        self.assertEqual(value("hots3_tier_bucket_state", bucket="ckpt", state="ok"), 1)
        self.assertGreater(value("hots3_tier_upstream_bytes_total", upstream="golden", **{"class": "writeback"}), 0)
        self.assertEqual(value("hots3_tier_oldest_owed_age_seconds", bucket="ckpt"), 0)
        self.assertEqual(value("hots3_tier_watermark_ratio", mark="high") > 0, True)
        run = subprocess.run(["promtool", "check", "metrics"], input=self.scrape(), capture_output=True,
                             text=True, timeout=60)
        self.assertEqual((run.returncode, (run.stdout + run.stderr).strip()), (0, ""))

    def test_reads_through_revalidations_and_upstream_requests_are_counted(self):
        body = os.urandom(100000)
        self.s3.put_object(Bucket="ckpt", Key="r/0", Body=body)
        for command in (("flush", "--prefix", "r/", "--wait"), ("evict", "--prefix", "r/")):
            rc, out, err = self.tier.run_hots3("tier", command[0], "--endpoint", self.endpoint, "--bucket", "ckpt",
                                               *command[1:])
            self.assertEqual(rc, 0, out + err)
        before = samples(self.scrape())

        def delta(after, name, **labels):
            key = (name, frozenset(labels.items()))
            return (after.get(key) or 0) - (before.get(key) or 0)

        miss = self.s3.get_object(Bucket="ckpt", Key="r/0")
        self.assertEqual(miss["ResponseMetadata"]["HTTPHeaders"]["x-hots3-cache"], "miss")
        self.assertEqual(miss["Body"].read(), body)
        hit = self.s3.get_object(Bucket="ckpt", Key="r/0")
        self.assertEqual(hit["ResponseMetadata"]["HTTPHeaders"]["x-hots3-cache"], "hit")
        hit["Body"].read()
        # Cache-Control: no-cache has the upstream asked whether the version is still current.
        forced = s3.send(self.local.port, s3.SignedRequest("GET", "/ckpt/r/0", headers={"cache-control": "no-cache"},
                                                           port=self.local.port).wire())
        self.assertEqual(forced.status, 200)
        self.assertEqual(forced.header("x-hots3-cache"), "revalidated")
        deadline = time.monotonic() + 30
        while True:  # the read counts reach the metrics with the tier's next report
            after = samples(self.scrape())
            if delta(after, "hots3_tier_reads_total", bucket="ckpt", result="revalidated") >= 1:
                break
            self.assertLess(time.monotonic(), deadline, "the reads never reached the metrics")
            time.sleep(0.2)
        for result, n in (("miss", 1), ("hit", 1), ("revalidated", 1), ("partial", 0), ("stale", 0)):
            self.assertEqual(delta(after, "hots3_tier_reads_total", bucket="ckpt", result=result), n, result)
        self.assertEqual(delta(after, "hots3_tier_read_bytes_total", bucket="ckpt", result="miss"), len(body))
        self.assertEqual(delta(after, "hots3_tier_revalidations_total", bucket="ckpt", result="current"), 1)
        self.assertEqual(delta(after, "hots3_tier_cold_ttfb_seconds_count", bucket="ckpt"), 1)
        self.assertGreater(delta(after, "hots3_tier_cold_ttfb_seconds_sum", bucket="ckpt"), 0)
        # The upstream saw the GET of the miss (200) and the HEAD of the revalidation (304).
        self.assertEqual(delta(after, "hots3_tier_upstream_requests_total", upstream="golden", op="GetObject",
                               status="200"), 1)
        self.assertEqual(delta(after, "hots3_tier_upstream_requests_total", upstream="golden", op="HeadObject",
                               status="304"), 1)
        self.assertGreaterEqual(after.get(("hots3_tier_upstream_requests_total", frozenset(
            {"upstream": "golden", "op": "PutObject", "status": "200"}.items()))) or 0, 1)  # the upload
        # Uploads, probes and reads came faster than 20 a second now and then.
        self.assertGreater(after[("hots3_tier_limiter_wait_seconds_total",
                                  frozenset({"upstream": "golden", "limit": "requests"}.items()))], 0)
        self.assertEqual(after[("hots3_tier_limiter_wait_seconds_total",
                                frozenset({"upstream": "golden", "limit": "link"}.items()))], 0)  # no cap


if __name__ == "__main__":
    unittest.main(verbosity=2)
