"""The page pool of the C API: page indices of one paged KV cache and the
block tables of its requests (the memory of the cache is the caller's)."""

import ctypes

import numpy as np

from . import _capi
from ._runtime import _Handle


def _i32(array):
    return array.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))


def _requests(requests):
    ids = np.ascontiguousarray(requests, dtype=np.int64).reshape(-1)
    return ids, ids.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))


class PagePool(_Handle):
    """Pages of a pool kv[num_pages, page_size, row]: token t of a request
    lives in row t % page_size of its page t // page_size; its slot is
    page * page_size + t % page_size. Not synchronized."""

    _close = "mla_page_pool_destroy"

    def __init__(self, num_pages, page_size):
        super().__init__()
        _capi.call("mla_page_pool_create", num_pages, page_size,
                   ctypes.byref(self._handle))

    def append_tokens(self, request, count):
        """Appends `count` tokens to `request` (created if new) and returns
        their slots (int32, an append_kv slot_mapping). Changes nothing
        when the pool has too few free pages."""
        slots = np.empty(max(count, 0), np.int32)  # the runtime checks count
        _capi.call("mla_page_pool_append_tokens", self._live(), request,
                   count, _i32(slots))
        return slots

    def free_request(self, request):
        """Returns the request's pages to the pool."""
        _capi.call("mla_page_pool_free_request", self._live(), request)

    def allocate_pages(self, count):
        """Takes `count` pages outside any request (int32 indices)."""
        pages = np.empty(max(count, 0), np.int32)
        _capi.call("mla_page_pool_allocate_pages", self._live(), count,
                   _i32(pages))
        return pages

    def free_pages(self, pages):
        """Returns pages taken by allocate_pages."""
        pages = np.ascontiguousarray(pages, dtype=np.int32).reshape(-1)
        _capi.call("mla_page_pool_free_pages", self._live(), _i32(pages),
                   pages.size)

    def info(self):
        """{num_pages, page_size, free_pages, num_requests}."""
        info = _capi.PagePoolInfo()
        _capi.call("mla_page_pool_get_info", self._live(), ctypes.byref(info))
        return {name: getattr(info, name) for name, _ in info._fields_}

    def request_info(self, request):
        """{exists, length, num_pages, tokens_without_new_pages,
        tokens_that_fit} of a request."""
        info = _capi.RequestInfo()
        _capi.call("mla_page_pool_request_info", self._live(), request,
                   ctypes.byref(info))
        return {name: getattr(info, name) for name, _ in info._fields_}

    def block_table(self, requests, max_pages=None):
        """(block_table int32 [len(requests), max_pages], seq_lens int32
        [len(requests)]) of the requests, a decode launch's inputs;
        max_pages defaults to the most pages any of them holds (at least
        1)."""
        ids, ids_p = _requests(requests)
        if max_pages is None:
            most = ctypes.c_int64()
            _capi.call("mla_page_pool_max_pages", self._live(), ids_p,
                       ids.size, ctypes.byref(most))
            max_pages = max(most.value, 1)
        table = np.empty((ids.size, max_pages), np.int32)
        lens = np.empty(ids.size, np.int32)
        _capi.call("mla_page_pool_export_block_table", self._live(), ids_p,
                   ids.size, max_pages, _i32(table), _i32(lens))
        return table, lens
