import { BackendSrv, BackendSrvRequest, FetchResponse } from '@grafana/runtime';
import { from, lastValueFrom, Observable } from 'rxjs';

/**
 * harnessBackendSrv is the part of Grafana's BackendSrv that
 * DataSourceWithBackend uses (fetch; get for convenience), over the
 * browser's fetch. Like Grafana's, it rejects with the response for HTTP
 * errors (≥ 400), which toDataQueryResponse turns into per-query errors.
 */
export const harnessBackendSrv = {
  fetch<T>(opts: BackendSrvRequest): Observable<FetchResponse<T>> {
    return from(
      (async () => {
        let url = opts.url;
        if (opts.params && Object.keys(opts.params).length > 0) {
          url += (url.includes('?') ? '&' : '?') + new URLSearchParams(opts.params as Record<string, string>).toString();
        }
        const res = await window.fetch(url, {
          method: opts.method ?? 'GET',
          headers: { 'Content-Type': 'application/json', ...(opts.headers ?? {}) },
          body: opts.data === undefined ? undefined : JSON.stringify(opts.data),
        });
        const text = await res.text();
        const data = (text ? JSON.parse(text) : undefined) as T;
        const resp: FetchResponse<T> = {
          data,
          status: res.status,
          statusText: res.statusText,
          ok: res.ok,
          headers: res.headers,
          redirected: res.redirected,
          type: res.type,
          url,
          config: opts,
        };
        if (res.status >= 400) {
          throw { ...resp, data: data ?? {} };
        }
        return resp;
      })()
    );
  },
  get<T>(url: string, params?: Record<string, string>): Promise<T> {
    return lastValueFrom(harnessBackendSrv.fetch<T>({ url, params })).then((r) => r.data);
  },
} as unknown as BackendSrv;
