"""A loopback relay that ends every event stream with ``data: [DONE]``: ``python sse_done_relay.py UPSTREAM PORT``.

``transformers serve`` (transformers 5.24) ends a streamed chat completion without OpenAI's
``data: [DONE]`` sentinel; verifiers' interception server waits for it and fails the call
("upstream stream ended before its terminal event"). The end-to-end verifiers test puts
this relay between the two.
"""

import sys

from aiohttp import ClientSession, web


def relay_app(upstream: str) -> web.Application:
    """An app that forwards every request to ``upstream`` and appends the sentinel to event streams."""

    async def relay(request: web.Request) -> web.StreamResponse:
        headers = {"content-type": request.headers.get("content-type", "application/json")}
        async with ClientSession() as session:
            async with session.request(request.method, upstream + request.rel_url.path_qs,
                                       data=await request.read(), headers=headers) as reply:
                if reply.content_type != "text/event-stream":
                    return web.Response(body=await reply.read(), status=reply.status, content_type=reply.content_type)
                out = web.StreamResponse(status=reply.status, headers={"content-type": "text/event-stream"})
                await out.prepare(request)
                async for chunk in reply.content.iter_any():
                    await out.write(chunk)
                await out.write(b"data: [DONE]\n\n")
                await out.write_eof()
                return out

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", relay)
    return app


if __name__ == "__main__":
    web.run_app(relay_app(sys.argv[1]), host="127.0.0.1", port=int(sys.argv[2]), print=None)
