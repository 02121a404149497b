/* The warm reference server: scripts/kb_reference.py --serve, one per user, python and helper
 * version, with torch imported once. A verify of an imported task attaches to a child it forks
 * instead of starting python and importing torch (3-5 s of every such verify). The first verify
 * that finds none starts one in the background and draws its own seeds as before; the server
 * ends after STITCH_REF_SERVER_IDLE seconds (default 600) without a verify; STITCH_REF_SERVER=0
 * turns it off. Its socket lives in a folder only this user may enter ($XDG_RUNTIME_DIR or /tmp,
 * stitch-ref-UID); the runners' sandbox denies connect(), so no candidate reaches it. */
#ifndef ST_REF_SERVER_H
#define ST_REF_SERVER_H

/* A socket connected to this user's server for `py` and `helper`, or -1 when there is none (or
 * it is off, or its folder is not safe); then one is started in the background for the verifies
 * that follow. *ino: the inode of the socket file connected to, for vx_ref_server_drop. */
int vx_ref_server_connect(const char *py, const char *helper, unsigned long long *ino);

/* The server behind the socket file of inode `ino` did not answer the attach (it hangs, or it
 * was dying when we connected): that socket is removed, where it is still the one, and a new
 * server is started for the verifies that follow (a hung server never reaches its idle limit). */
void vx_ref_server_drop(const char *py, const char *helper, unsigned long long ino);

#endif
