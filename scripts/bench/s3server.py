#!/usr/bin/env python3
"""moto's S3 server for the benchmarks that need one (replicate_bench.py,
moments_bench.py): started on a free loopback port with one bucket, `bench`,
listed through boto3, stopped at the end. One place, so that each driver
starts and lists it alike."""
import os, socket, subprocess, sys, time

import boto3

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from s3proxy import free_port  # noqa: E402


class Moto:
    """A moto_server on 127.0.0.1 with the bucket `bench`; `env` carries its test credentials."""

    def __init__(self, env, bucket="bench"):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.bucket = bucket
        self.process = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(self.port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            for _ in range(300):
                if self.process.poll() is not None:
                    raise RuntimeError(f"moto_server exited with status {self.process.returncode}")
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                raise RuntimeError(f"moto_server did not listen on port {self.port} within 30 s")
            self.s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                                   aws_access_key_id="test", aws_secret_access_key="test")
            self.s3.create_bucket(Bucket=bucket)
        except BaseException:
            self.stop()
            raise

    def objects(self, prefix):
        """Every object under `prefix` (all pages of the listing)."""
        out, token = [], None
        while True:
            kw = dict(Bucket=self.bucket, Prefix=prefix)
            if token:
                kw["ContinuationToken"] = token
            r = self.s3.list_objects_v2(**kw)
            out += r.get("Contents", [])
            if not r.get("IsTruncated"):
                return out
            token = r["NextContinuationToken"]

    def stop(self):
        self.process.terminate()
        self.process.wait()
