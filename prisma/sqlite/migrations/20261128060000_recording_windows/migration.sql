-- CreateTable
CREATE TABLE "recording_windows" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "partner_id" TEXT NOT NULL,
    "company_id" TEXT,
    "started_at" DATETIME NOT NULL,
    "ends_at" DATETIME NOT NULL,
    "opened_by" TEXT NOT NULL
);

-- CreateIndex
CREATE INDEX "recording_windows_partner_id_ends_at_idx" ON "recording_windows"("partner_id", "ends_at");

-- CreateIndex
CREATE INDEX "recording_windows_ends_at_idx" ON "recording_windows"("ends_at");
