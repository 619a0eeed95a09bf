; EnergyScope desktop app: Windows installer (NSIS 3, built on Linux by
; `make dist` with Debian's nsis package):
;
;   makensis -DVERSION=0.1.0 -DEXE=bin/energyscope.exe -DOUT=dist/EnergyScope-Setup.exe build/windows/installer/energyscope.nsi
;
; A per-user install (no administrator): the app goes to
; %LOCALAPPDATA%\Programs\EnergyScope, its data stays in the default home
; %LOCALAPPDATA%\EnergyScope. The installer
;   - registers the Office add-in for sideloading: a value under
;     HKCU\Software\Microsoft\Office\16.0\WEF\Developer pointing to
;     %LOCALAPPDATA%\EnergyScope\addin\manifest.xml, the manifest the app
;     writes (for its bridge port) every time it starts;
;   - starts the app at the end, which creates the bridge's local CA; the
;     app's Excel view trusts it for the current user with one click
;     (certutil -user -addstore Root, which Windows asks to confirm).
; The uninstaller removes the program, the shortcuts, the add-in
; registration and the CA from the user's trusted roots; the data folder
; stays (it may hold gigabytes the user wants to keep).

Unicode true
!include "MUI2.nsh"

!ifndef VERSION
  !define VERSION "0.1.0"
!endif
!ifndef EXE
  !define EXE "..\..\..\bin\energyscope.exe"
!endif
!ifndef OUT
  !define OUT "EnergyScope-Setup.exe"
!endif
!ifndef ICON
  !define ICON "..\icon.ico"
!endif

!define APP "EnergyScope"
!define UNINST_KEY "Software\Microsoft\Windows\CurrentVersion\Uninstall\EnergyScope"
!define WEF_KEY "Software\Microsoft\Office\16.0\WEF\Developer"
; The add-in's id (functions/addin/manifest.xml <Id>): the value's name.
!define ADDIN_ID "6f1c2a8e-4b7d-4e95-9a53-0c2d8e7f1b46"

Name "${APP}"
OutFile "${OUT}"
InstallDir "$LOCALAPPDATA\Programs\${APP}"
InstallDirRegKey HKCU "${UNINST_KEY}" "InstallLocation"
RequestExecutionLevel user
SetCompressor /SOLID lzma
VIProductVersion "${VERSION}.0"
VIAddVersionKey "ProductName" "${APP}"
VIAddVersionKey "FileDescription" "${APP} installer"
VIAddVersionKey "FileVersion" "${VERSION}"
VIAddVersionKey "LegalCopyright" "EnergyScope contributors"

!define MUI_ABORTWARNING
; The app's icon (build/windows/icon.ico, also in the exe's resources).
!define MUI_ICON "${ICON}"
!define MUI_UNICON "${ICON}"
!define MUI_FINISHPAGE_RUN "$INSTDIR\energyscope.exe"
!define MUI_FINISHPAGE_RUN_TEXT "Start EnergyScope (then open Excel → Trust certificate in the app)"
!insertmacro MUI_PAGE_DIRECTORY
!insertmacro MUI_PAGE_INSTFILES
!insertmacro MUI_PAGE_FINISH
!insertmacro MUI_UNPAGE_CONFIRM
!insertmacro MUI_UNPAGE_INSTFILES
!insertmacro MUI_LANGUAGE "English"

Section "EnergyScope" SecMain
  SectionIn RO
  SetOutPath "$INSTDIR"
  File "/oname=energyscope.exe" "${EXE}"
  WriteUninstaller "$INSTDIR\uninstall.exe"

  CreateShortcut "$SMPROGRAMS\${APP}.lnk" "$INSTDIR\energyscope.exe"
  CreateShortcut "$DESKTOP\${APP}.lnk" "$INSTDIR\energyscope.exe"

  ; Sideload the add-in for Excel (current user).
  WriteRegStr HKCU "${WEF_KEY}" "${ADDIN_ID}" "$LOCALAPPDATA\EnergyScope\addin\manifest.xml"

  ; Apps & features.
  WriteRegStr HKCU "${UNINST_KEY}" "DisplayName" "${APP}"
  WriteRegStr HKCU "${UNINST_KEY}" "DisplayVersion" "${VERSION}"
  WriteRegStr HKCU "${UNINST_KEY}" "Publisher" "EnergyScope"
  WriteRegStr HKCU "${UNINST_KEY}" "DisplayIcon" "$INSTDIR\energyscope.exe"
  WriteRegStr HKCU "${UNINST_KEY}" "InstallLocation" "$INSTDIR"
  WriteRegStr HKCU "${UNINST_KEY}" "UninstallString" '"$INSTDIR\uninstall.exe"'
  WriteRegStr HKCU "${UNINST_KEY}" "QuietUninstallString" '"$INSTDIR\uninstall.exe" /S'
  WriteRegDWORD HKCU "${UNINST_KEY}" "NoModify" 1
  WriteRegDWORD HKCU "${UNINST_KEY}" "NoRepair" 1
SectionEnd

Section "Uninstall"
  ; Stop a running app so that its files can go.
  nsExec::Exec 'taskkill /IM energyscope.exe /F'
  Pop $0

  ; The bridge's CA out of the user's trusted roots (Windows may ask).
  nsExec::Exec `powershell -NoProfile -NonInteractive -Command "Get-ChildItem Cert:\CurrentUser\Root | Where-Object { $$_.Subject -like '*EnergyScope local bridge CA*' } | Remove-Item"`
  Pop $0

  DeleteRegValue HKCU "${WEF_KEY}" "${ADDIN_ID}"
  DeleteRegKey /ifempty HKCU "${WEF_KEY}"
  DeleteRegKey HKCU "${UNINST_KEY}"

  Delete "$SMPROGRAMS\${APP}.lnk"
  Delete "$DESKTOP\${APP}.lnk"
  Delete "$INSTDIR\energyscope.exe"
  Delete "$INSTDIR\uninstall.exe"
  RMDir "$INSTDIR"
SectionEnd
