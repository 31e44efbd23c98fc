-- CreateTable
CREATE TABLE "signing_keys" (
    "kid" TEXT NOT NULL PRIMARY KEY,
    "first_seen_at" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
