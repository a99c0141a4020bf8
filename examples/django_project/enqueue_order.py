"""Enqueue a Django task through Django's task API, then show its result as Django sees it.

PYQUEUE_ADDRESS=127.0.0.1:7411 python enqueue_order.py        # (server running)
DJANGO_SETTINGS_MODULE=shop.settings pyqueue worker pyqueue.contrib.django:app
"""

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import django

django.setup()

from shop.tasks import send_receipt  # noqa: E402

result = send_receipt.enqueue(42, email="ada@example.com")
print(result.id, result.status)
