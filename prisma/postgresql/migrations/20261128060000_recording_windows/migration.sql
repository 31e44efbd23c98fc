-- CreateTable
CREATE TABLE "recording_windows" (
    "id" TEXT NOT NULL,
    "partner_id" TEXT NOT NULL,
    "company_id" TEXT,
    "started_at" TIMESTAMP(3) NOT NULL,
    "ends_at" TIMESTAMP(3) NOT NULL,
    "opened_by" TEXT NOT NULL,

    CONSTRAINT "recording_windows_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "recording_windows_partner_id_ends_at_idx" ON "recording_windows"("partner_id", "ends_at");

-- CreateIndex
CREATE INDEX "recording_windows_ends_at_idx" ON "recording_windows"("ends_at");
