// Runs firebase-tools' Cloud Storage emulator (GCS JSON API + Firebase API)
// without the Java rules runtime (only the Firebase-SDK /v0 API needs it; the
// GCS JSON API under /storage/v1 and /upload/storage/v1 uses the admin layer).
// Usage: node gcs-emu.js [port] [host]
// The project's copy of the testkit recipe: tests/integration/gcs_lib.sh places it
// beside node_modules (build-deps/gcs-emu, from scripts/setup.sh --test) and runs it.
const path = require("path");
const base = path.join(__dirname, "node_modules/firebase-tools/lib/emulator/storage");
const { StorageEmulator } = require(path.join(base, "index.js"));
const { EmulatorRegistry } = require(path.join(base, "../registry.js"));
const port = +(process.argv[2] || 9199), host = process.argv[3] || "127.0.0.1";
const emu = new StorageEmulator({ projectId: "demo-test", host, port,
  rules: { name: "storage.rules", content: "rules_version='2';service firebase.storage{match /b/{bucket}/o{match /{p=**}{allow read,write:if true;}}}" } });
emu._rulesRuntime.start = async () => {};
emu._rulesRuntime.stop = async () => {};
emu._rulesManager.start = async () => {};
emu._rulesManager.stop = async () => {};
EmulatorRegistry.start(emu).then(() => console.log(`gcs emulator listening on http://${host}:${port}`),
                 (e) => { console.error(e); process.exit(1); });
// firebase-tools bug: POST uploadType=media without ?name= throws after replying 400 and
// would kill the process; keep serving instead.
process.on("uncaughtException", (e) => console.error("uncaught (ignored):", e.message));
const bye = () => emu.stop().finally(() => process.exit(0));
process.on("SIGTERM", bye); process.on("SIGINT", bye);
